//! loopd's own time per turn, without the model: turns of three tool calls against
//! fakellama (in-process, no delay), timed from loopd's side, without and then with loopd's
//! meter (metrics and usage accounts) fed the turns' events; then the peak RSS of the real
//! loopd daemon after a run of tasks through its API.
//!
//! `cargo bench -p loopd --bench turn_overhead` (sessions on the temp dir's disk), and
//! `TURN_BENCH_DIR=/dev/shm cargo bench -p loopd --bench turn_overhead` (on tmpfs).
//!
//! "Own time" is a turn's wall time (user record to turn end) minus the time spent inside the
//! model calls (request sent to answer parsed, as `TurnEvent::ModelDone::model_us` reports).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use bxcore::{SessionId, TurnEvent};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use loopd::blocking::Blocking;
use loopd::config::Config;
use loopd::llama::{Client, ClientOptions};
use loopd::meter::{Meter, system_clock};
use loopd::session::Store;
use loopd::tools::{FakeTools, Registry};
use loopd::turn::{Runtime, Stop, run_turn, start_turn};
use std::time::{Duration, Instant};

/// Turns measured.
const TURNS: usize = 300;
/// Turns per session (a fresh session keeps prompts from growing without bound).
const TURNS_PER_SESSION: usize = 10;
/// Turns replayed to time the meter alone.
const REPLAYS: usize = 100_000;
/// Replayed turns timed together.
const REPLAY_BATCH: usize = 1_000;
/// Tasks sent to the real daemon before its RSS is read.
const DAEMON_TASKS: usize = 100;

const SCRIPT: &str = r#"
[[rule]]
when_role = "user"
tool_calls = [
  { name = "clock", arguments = "{}" },
  { name = "find_tool", arguments = "{\"query\":\"echo\"}" },
  { name = "call_tool", arguments = "{\"name\":\"echo\",\"arguments\":{\"text\":\"ping\"}}" },
]
[[rule]]
when_role = "tool"
reply = "All three tools answered."
"#;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{name}: n={} p50={:?} p99={:?} max={:?}",
        samples.len(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.99),
        samples[samples.len() - 1]
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(fakellama::start(fakellama::Options {
            n_ctx: 1 << 20,
            script: fakellama::Script::parse(SCRIPT).unwrap(),
            ..Default::default()
        }))
        .unwrap();
    // The same turns without the meter (NoMeter), then with loopd's meter fed every event.
    in_process(&rt, &fake.url(), false);
    in_process(&rt, &fake.url(), true);
    daemon_rss(&rt, &fake.url());
}

/// `TURNS` turns in-process; with `metered`, through loopd's meter as the engine feeds it
/// (each event to the turn's tally, the task's meter as the runtime's), timing the meter's
/// own share and the accounts' durable write after each turn (the engine's `save`).
fn in_process(rt: &tokio::runtime::Runtime, url: &str, metered: bool) {
    // TURN_BENCH_DIR=/dev/shm puts the sessions on tmpfs, where fdatasync costs nothing:
    // the difference to the default (a real disk) is the price of durability.
    let base = std::env::var_os("TURN_BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into());
    let state = tempfile::tempdir_in(&base).unwrap();
    let store = Store::new(state.path()).unwrap();
    let client = Client::new(ClientOptions::for_url(url).unwrap());
    let blocking = Blocking::new(rt.handle().clone());
    let cfg = Config {
        state_dir: state.path().to_path_buf(),
        ..Config::default()
    };
    let meter = Meter::load(&cfg, system_clock()).unwrap();
    let registry = Registry::m2b();
    let port = FakeTools::new();
    let (mut own, mut model, mut calls) = (Vec::new(), Vec::new(), Vec::new());
    let (mut metering, mut saves) = (Vec::new(), Vec::new());
    let mut turn_events = Vec::new();
    for n in 0..TURNS {
        let id = SessionId::new(&format!("bench-{}", n / TURNS_PER_SESSION)).unwrap();
        let task = meter.task(id.clone(), &registry);
        let turn_meter: &dyn loopd::turn::Meter = if metered {
            &task
        } else {
            &loopd::turn::NoMeter
        };
        let runtime = Runtime {
            cfg: &cfg,
            models: &loopd::route::Targets::of(&client, &loopd::config::Slots::default()),
            blocking: &blocking,
            port: &port,
            registry: &registry,
            system: "You are a benchmark.",
            n_ctx: fakellama::DEFAULT_N_CTX,
            children: &loopd::subagent::Subagents,
            owner: &loopd::turn::NoOwner,
            meter: turn_meter,
        };
        let mut tally = task.tally();
        let mut session = store.open_or_create(&id).unwrap();
        let started = Instant::now();
        start_turn(&mut session, "use three tools").unwrap();
        let mut model_us = 0;
        let mut call_started = None;
        let mut in_meter = Duration::ZERO;
        let mut on_event = |event: &TurnEvent| {
            if n == 0 {
                turn_events.push(event.clone());
            }
            if metered {
                let at = Instant::now();
                tally.event(event);
                in_meter += at.elapsed();
            }
            match event {
                TurnEvent::ModelDone { model_us: us, .. } => model_us += us,
                TurnEvent::ToolCall { .. } => call_started = Some(Instant::now()),
                TurnEvent::ToolResult { .. } => {
                    if let Some(at) = call_started.take() {
                        calls.push(at.elapsed());
                    }
                }
                _ => {}
            }
        };
        run_turn(&runtime, &mut session, &Stop::default(), &mut on_event).unwrap();
        let wall = started.elapsed();
        let in_model = Duration::from_micros(model_us);
        own.push(wall.saturating_sub(in_model));
        model.push(in_model);
        if metered {
            metering.push(in_meter);
            let at = Instant::now();
            meter.save().unwrap();
            saves.push(at.elapsed());
        }
    }
    let which = if metered {
        "with the meter"
    } else {
        "without the meter (NoMeter)"
    };
    println!(
        "loopd in-process, {which}, {TURNS} turns of 3 tool calls (2 model calls each), \
         fakellama without delay, sessions under {}:",
        base.to_string_lossy()
    );
    report("  loopd's own time per turn", own);
    report(
        "  per tool call (dispatch, FakeTools, cap, durable append)",
        calls,
    );
    report("  model calls per turn (fakellama round trips)", model);
    if metered {
        report(
            "  the meter's own time per turn (its events: metrics and accounts)",
            metering,
        );
        report(
            "  the accounts' durable write after a turn (Meter::save)",
            saves,
        );
        replay(&meter, &registry, &turn_events);
    }
}

/// The meter's time per turn without the turn around it: one recorded turn's events fed to a
/// fresh tally `REPLAYS` times, in batches of `REPLAY_BATCH` (each batch's mean is a sample).
fn replay(meter: &Meter, registry: &Registry, events: &[TurnEvent]) {
    let id = SessionId::new("replay").unwrap();
    let task = meter.task(id, registry);
    let mut samples = Vec::new();
    for _ in 0..REPLAYS / REPLAY_BATCH {
        let at = Instant::now();
        for _ in 0..REPLAY_BATCH {
            let mut tally = task.tally();
            for event in events {
                tally.event(event);
            }
        }
        samples.push(at.elapsed() / REPLAY_BATCH as u32);
    }
    report(
        &format!(
            "  the meter's time per turn, one turn's {} events replayed (mean of {REPLAY_BATCH})",
            events.len()
        ),
        samples,
    );
}

fn daemon_rss(rt: &tokio::runtime::Runtime, url: &str) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("loopd.sock");
    let config = dir.path().join("loopd.toml");
    let system = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/system.md");
    std::fs::write(
        &config,
        format!(
            "socket = {socket:?}\nstate_dir = {:?}\n[llama]\nurl = {url:?}\n[baseline]\nsystem = {system:?}\n",
            dir.path().join("state")
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_loopd"))
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "loopd did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = Instant::now();
    for n in 0..DAEMON_TASKS {
        let body = format!(
            "{{\"session\":\"rss-{}\",\"text\":\"use three tools\"}}",
            n % 10
        );
        rt.block_on(stream_task(&socket, body));
    }
    let elapsed = started.elapsed();
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .map(|l| l.split_whitespace().nth(1).unwrap_or("?").to_string())
            .unwrap_or_default()
    };
    println!(
        "loopd daemon (release), {DAEMON_TASKS} tasks through the API over 10 sessions in {elapsed:?}: \
         peak RSS (VmHWM) {} kB, RSS now {} kB",
        field("VmHWM:"),
        field("VmRSS:")
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Sends one task with `Accept: text/event-stream` and reads the stream to its end.
async fn stream_task(socket: &std::path::Path, body: String) {
    let request = hyper::Request::post("/v1/tasks")
        .header("host", "loopd")
        .header("accept", "text/event-stream")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = bxhttp::client::send(socket, request).await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let text = response.into_body().collect().await.unwrap().to_bytes();
    assert!(String::from_utf8_lossy(&text).contains("\"ended\""));
}
