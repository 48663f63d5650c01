//! loopd's own time per turn, without the model: turns of three tool calls against
//! fakellama (in-process, no delay), timed from loopd's side; then the peak RSS of the real
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
use loopd::session::Store;
use loopd::tools::{FakeTools, Registry};
use loopd::turn::{Runtime, Stop, run_turn, start_turn};
use std::time::{Duration, Instant};

/// Turns measured.
const TURNS: usize = 300;
/// Turns per session (a fresh session keeps prompts from growing without bound).
const TURNS_PER_SESSION: usize = 10;
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
    in_process(&rt, &fake.url());
    daemon_rss(&rt, &fake.url());
}

fn in_process(rt: &tokio::runtime::Runtime, url: &str) {
    // TURN_BENCH_DIR=/dev/shm puts the sessions on tmpfs, where fdatasync costs nothing:
    // the difference to the default (a real disk) is the price of durability.
    let base = std::env::var_os("TURN_BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into());
    let state = tempfile::tempdir_in(&base).unwrap();
    let store = Store::new(state.path()).unwrap();
    let client = Client::new(ClientOptions::for_url(url).unwrap());
    let blocking = Blocking::new(rt.handle().clone());
    let cfg = Config::default();
    let registry = Registry::m2b();
    let port = FakeTools::new();
    let runtime = Runtime {
        cfg: &cfg,
        client: &client,
        blocking: &blocking,
        port: &port,
        registry: &registry,
        system: "You are a benchmark.",
        n_ctx: fakellama::DEFAULT_N_CTX,
        children: &loopd::subagent::Subagents,
        owner: &loopd::turn::NoOwner,
        meter: &loopd::turn::NoMeter,
    };
    let (mut own, mut model, mut calls) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..TURNS {
        let id = SessionId::new(&format!("bench-{}", n / TURNS_PER_SESSION)).unwrap();
        let mut session = store.open_or_create(&id).unwrap();
        let started = Instant::now();
        start_turn(&mut session, "use three tools").unwrap();
        let mut model_us = 0;
        let mut call_started = None;
        let mut on_event = |event: &TurnEvent| match event {
            TurnEvent::ModelDone { model_us: us, .. } => model_us += us,
            TurnEvent::ToolCall { .. } => call_started = Some(Instant::now()),
            TurnEvent::ToolResult { .. } => {
                if let Some(at) = call_started.take() {
                    calls.push(at.elapsed());
                }
            }
            _ => {}
        };
        run_turn(&runtime, &mut session, &Stop::default(), &mut on_event).unwrap();
        let wall = started.elapsed();
        let in_model = Duration::from_micros(model_us);
        own.push(wall.saturating_sub(in_model));
        model.push(in_model);
    }
    println!(
        "loopd in-process, {TURNS} turns of 3 tool calls (2 model calls each), fakellama \
         without delay, sessions under {}:",
        base.to_string_lossy()
    );
    report("  loopd's own time per turn", own);
    report(
        "  per tool call (dispatch, FakeTools, cap, durable append)",
        calls,
    );
    report("  model calls per turn (fakellama round trips)", model);
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
