//! loopd against a GPU-like model server: fakellama's `Profile::gpu` (prefill 7 µs a token,
//! generation 1.3 ms a token, each slot on its own, slot files 17 µs a token; all kept in real
//! time), in-process, with the engine as the daemon runs it.
//!
//! 1. **Throughput** with 32 and 64 main slots: as many sessions each send a task at once, three
//!    rounds; generated tokens per second through loopd, against the same requests (captured
//!    from fakellama) replayed raw, all at once, over plain HTTP.
//! 2. **Per call**: one session's calls one after another; loopd's model call time
//!    (`ModelDone::model_us`: request sent to answer parsed) against the same request replayed
//!    raw, one at a time.
//! 3. **KV files**: three sessions alternating on one main slot; what loopd chose (files while
//!    it measures, then prefill) and the turns' wall time in each phase.
//! 4. **The save after a turn**: the same alternation where files win (prefill 250 µs a token,
//!    the GPU profile's files), each session coming back after the last turn's save is done,
//!    as after an owner's reading time; each turn's wall time with the save after the turn
//!    (`[kv] save_after_turn`, the default) and with the save at the switch.
//!
//! `cargo bench -p loopd --bench gpu_profile`.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use bxcore::{SessionId, TurnEvent};
use loopd::api::Backend;
use loopd::blocking::Blocking;
use loopd::config::{Config, Kv, MainSlots, Slots};
use loopd::engine::{Engine, EngineParts, ToolSource};
use loopd::kv::SlotFiles;
use loopd::llama::{Client, ClientOptions, ServerInfo};
use loopd::meter::{Meter, system_clock};
use loopd::route::Router;
use loopd::session::Store;
use loopd::tools::{FakeTools, Registry};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Rounds of tasks in the throughput part.
const ROUNDS: usize = 3;
/// Calls timed one after another in the per-call part.
const SEQUENTIAL_CALLS: usize = 30;
/// Alternations of the three sessions in the KV part.
const ALTERNATIONS: usize = 8;
/// Tokens of context per slot.
const N_CTX: u32 = 8192;
/// The answer: about 32 tokens, as in the H200 measurement.
const SCRIPT: &str = "default_reply = \"one two three four five six seven eight nine ten \
    eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty \
    twenty-one twenty-two twenty-three twenty-four\"\n";

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    for slots in [32, 64] {
        throughput(&rt, slots);
    }
    // A one-word answer: the call is the server's prefill and a token or two, so what loopd
    // adds is not lost in the generation's timer jitter; then the H200 run's answer of about
    // 32 tokens, a chunk each, for what loopd does per chunk.
    per_call(&rt, "a one-word answer", "default_reply = \"ok\"\n");
    per_call(&rt, "an answer of 24 words", SCRIPT);
    kv_choice(&rt);
    for save_after_turn in [false, true] {
        save_off_the_path(&rt, save_after_turn);
    }
}

/// fakellama with the GPU profile and `slots` slots (two more for the background and
/// subagent roles), keeping slot files in `kv` when given.
fn fake(
    rt: &tokio::runtime::Runtime,
    slots: u32,
    kv: Option<std::path::PathBuf>,
    script: &str,
) -> fakellama::Handle {
    fake_with(rt, slots, kv, script, fakellama::Profile::gpu())
}

/// [`fake`] with `profile`.
fn fake_with(
    rt: &tokio::runtime::Runtime,
    slots: u32,
    kv: Option<std::path::PathBuf>,
    script: &str,
    profile: fakellama::Profile,
) -> fakellama::Handle {
    rt.block_on(fakellama::start(fakellama::Options {
        n_ctx: N_CTX,
        slots: slots + 2,
        script: fakellama::Script::parse(script).unwrap(),
        slot_save_path: kv,
        profile,
        ..Default::default()
    }))
    .unwrap()
}

/// An engine over `fake` with `main` main slots, KV files on when `kv`.
fn engine(
    rt: &tokio::runtime::Runtime,
    fake: &fakellama::Handle,
    state: &std::path::Path,
    main: u32,
    kv: bool,
) -> Engine {
    let kv = Kv {
        enabled: kv,
        ..Kv::default()
    };
    engine_kv(rt, fake, state, main, kv)
}

/// [`engine`] with `kv` as its `[kv]`.
fn engine_kv(
    rt: &tokio::runtime::Runtime,
    fake: &fakellama::Handle,
    state: &std::path::Path,
    main: u32,
    kv: Kv,
) -> Engine {
    let mut cfg = Config {
        state_dir: state.to_path_buf(),
        ..Config::default()
    };
    cfg.slots = Slots {
        main: MainSlots((0..main).collect()),
        background: main,
        subagent: main + 1,
    };
    cfg.kv = kv;
    let info = ServerInfo {
        n_ctx: N_CTX,
        total_slots: main + 2,
        model: fakellama::MODEL_PATH.into(),
        model_path: fakellama::MODEL_PATH.into(),
        build_info: String::new(),
    };
    let client = Client::new(ClientOptions::for_url(&fake.url()).unwrap());
    let files = SlotFiles::open(&cfg.kv, &cfg.state_dir, &info).unwrap();
    let router = Router::single(client, &cfg.slots, info).with_kv(files);
    Engine::new(EngineParts {
        store: Store::new(&cfg.state_dir).unwrap(),
        port: std::sync::Arc::new(FakeTools::new()),
        tools: ToolSource::Fake(Registry::m2b()),
        system: "You are a benchmark.".into(),
        models: std::sync::Arc::new(router),
        blocking: Blocking::new(rt.handle().clone()),
        meter: std::sync::Arc::new(Meter::load(&cfg, system_clock()).unwrap()),
        cfg,
    })
}

/// What one task's turn reported: generated tokens, and each model call's `model_us`.
#[derive(Default)]
struct Ran {
    generated: u64,
    model_us: Vec<u64>,
}

/// Runs `text` on session `id` to its end.
async fn task(engine: &Engine, id: &str, text: &str) -> Ran {
    let mut submitted = engine
        .submit(proto::api::TaskRequest {
            session: Some(SessionId::new(id).unwrap()),
            text: text.into(),
            task_id: None,
            overheard: Vec::new(),
        })
        .await
        .unwrap();
    let mut ran = Ran::default();
    while let Some(event) = submitted.events.recv().await {
        match event {
            TurnEvent::ModelDone {
                usage, model_us, ..
            } => {
                ran.generated += usage.completion_tokens;
                ran.model_us.push(model_us);
            }
            TurnEvent::Ended { .. } => break,
            _ => {}
        }
    }
    ran
}

/// Sends `body` to `fake` as a chat request over a fresh connection and reads the whole
/// answer: the raw request, no client library.
async fn raw(url: &str, body: &serde_json::Value) -> Duration {
    let addr = url.trim_start_matches("http://").to_owned();
    let body = body.to_string();
    let started = Instant::now();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    started.elapsed()
}

fn throughput(rt: &tokio::runtime::Runtime, slots: u32) {
    let state = tempfile::tempdir().unwrap();
    let fake = fake(rt, slots, None, SCRIPT);
    let engine = engine(rt, &fake, state.path(), slots, false);
    let ids: Vec<String> = (0..slots).map(|n| format!("s{n}")).collect();
    let (mut generated, mut wall) = (0, Duration::ZERO);
    fake.clear_requests();
    for round in 0..ROUNDS {
        let started = Instant::now();
        let all = rt.block_on(async {
            let turns = ids.iter().map(|id| {
                let engine = engine.clone();
                let id = id.clone();
                tokio::spawn(async move { task(&engine, &id, &format!("task {round}")).await })
            });
            let mut all = Vec::new();
            for turn in turns.collect::<Vec<_>>() {
                all.push(turn.await.unwrap());
            }
            all
        });
        wall += started.elapsed();
        generated += all.iter().map(|r| r.generated).sum::<u64>();
    }
    let loopd_tps = generated as f64 / wall.as_secs_f64();
    // The same requests, raw: each round's all at once.
    let requests = fake.requests();
    let bodies: Vec<serde_json::Value> = requests.iter().map(|r| r.body.clone()).collect();
    let raw_generated: usize = requests.iter().map(|r| r.completion_tokens).sum();
    let mut raw_wall = Duration::ZERO;
    for round in bodies.chunks(slots as usize) {
        let started = Instant::now();
        rt.block_on(async {
            let sent: Vec<_> = round
                .iter()
                .map(|body| {
                    let (body, url) = (body.clone(), fake.url());
                    tokio::spawn(async move { raw(&url, &body).await })
                })
                .collect();
            for one in sent {
                one.await.unwrap();
            }
        });
        raw_wall += started.elapsed();
    }
    let raw_tps = raw_generated as f64 / raw_wall.as_secs_f64();
    println!(
        "throughput, {slots} main slots, {slots} sessions x {ROUNDS} rounds: loopd {loopd_tps:.0} \
         generated tokens/s, raw {raw_tps:.0} ({:.0}% of raw)",
        100.0 * loopd_tps / raw_tps
    );
    rt.block_on(engine.shutdown(20_000));
    rt.block_on(fake.shutdown());
}

fn percentile(mut samples: Vec<f64>, p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

fn per_call(rt: &tokio::runtime::Runtime, answer: &str, script: &str) {
    let state = tempfile::tempdir().unwrap();
    let fake = fake(rt, 1, None, script);
    let engine = engine(rt, &fake, state.path(), 1, false);
    fake.clear_requests();
    let mut loopd_ms = Vec::new();
    for n in 0..SEQUENTIAL_CALLS {
        let ran = rt.block_on(task(&engine, "one", &format!("call {n}")));
        loopd_ms.extend(ran.model_us.iter().map(|us| *us as f64 / 1000.0));
    }
    let bodies: Vec<serde_json::Value> = fake.requests().iter().map(|r| r.body.clone()).collect();
    let raw_ms: Vec<f64> = bodies
        .iter()
        .map(|body| rt.block_on(raw(&fake.url(), body)).as_secs_f64() * 1000.0)
        .collect();
    let more: Vec<f64> = loopd_ms.iter().zip(&raw_ms).map(|(l, r)| l - r).collect();
    let (loopd, raw) = (percentile(loopd_ms, 0.5), percentile(raw_ms, 0.5));
    println!(
        "per call, {answer}, one session, {SEQUENTIAL_CALLS} calls one after another: loopd's model call \
         p50 {loopd:.2} ms, the same request raw (a new connection each) p50 {raw:.2} ms; \
         loopd's more per call p50 {:.2} ms, p90 {:.2} ms",
        percentile(more.clone(), 0.5),
        percentile(more, 0.9)
    );
    rt.block_on(engine.shutdown(20_000));
    rt.block_on(fake.shutdown());
}

fn kv_choice(rt: &tokio::runtime::Runtime) {
    let state = tempfile::tempdir().unwrap();
    let kv = state.path().join("kv");
    std::fs::create_dir_all(&kv).unwrap();
    let fake = fake(rt, 1, Some(kv), SCRIPT);
    let engine = engine(rt, &fake, state.path(), 1, true);
    let files = engine.models().kv().unwrap();
    let mut phases: Vec<(String, Vec<f64>)> = Vec::new();
    for n in 0..ALTERNATIONS {
        for id in ["a", "b", "c"] {
            let choice = files.status().choices[0].choice.clone();
            let started = Instant::now();
            rt.block_on(task(
                &engine,
                id,
                &format!("task {n} of {id}: a few more words"),
            ));
            let ms = started.elapsed().as_secs_f64() * 1000.0;
            if n == 0 {
                continue;
            }
            match phases.last_mut() {
                Some((last, samples)) if *last == choice => samples.push(ms),
                _ => phases.push((choice, vec![ms])),
            }
        }
    }
    let status = files.status();
    for (choice, samples) in phases {
        println!(
            "kv, three sessions on one slot, switches while loopd chose {choice}: {} turns, \
             p50 {:.1} ms",
            samples.len(),
            percentile(samples, 0.5)
        );
    }
    let c = &status.choices[0];
    println!(
        "kv choice: {} (per 1k tokens: save and restore {:?} µs, prefill {:?} µs); {} saves, {} \
         restores",
        c.choice,
        c.file_us_per_1k_tokens,
        c.prefill_us_per_1k_tokens,
        status.saves,
        status.restores
    );
    rt.block_on(engine.shutdown(20_000));
    rt.block_on(fake.shutdown());
}

fn save_off_the_path(rt: &tokio::runtime::Runtime, save_after_turn: bool) {
    let state = tempfile::tempdir().unwrap();
    let kv = state.path().join("kv");
    std::fs::create_dir_all(&kv).unwrap();
    let profile = fakellama::Profile {
        prompt_us_per_token: 250,
        ..fakellama::Profile::gpu()
    };
    let fake = fake_with(rt, 1, Some(kv), SCRIPT, profile);
    let cfg = Kv {
        save_after_turn,
        ..Kv::default()
    };
    let engine = engine_kv(rt, &fake, state.path(), 1, cfg);
    let files = engine.models().kv().unwrap();
    let mut samples = Vec::new();
    let mut saved_after = 0;
    for n in 0..ALTERNATIONS {
        for id in ["a", "b", "c"] {
            let started = Instant::now();
            rt.block_on(task(
                &engine,
                id,
                &format!("task {n} of {id}: a few more words"),
            ));
            if n > 0 {
                samples.push(started.elapsed().as_secs_f64() * 1000.0);
            }
            // The owner reads the answer: the save after the turn, if any, is done before the
            // next session comes. Every turn but the first is on a slot already shared.
            if save_after_turn && (n, id) != (0, "a") {
                saved_after += 1;
            }
            let waited = Instant::now();
            while files.status().saves_after_turn < saved_after {
                assert!(waited.elapsed() < Duration::from_secs(10));
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
    let status = files.status();
    println!(
        "kv, files win (prefill 250 µs a token), three sessions on one slot, save_after_turn = \
         {save_after_turn}: switch turns p50 {:.1} ms ({} turns); {} saves, {} after a turn, {} \
         restores",
        percentile(samples.clone(), 0.5),
        samples.len(),
        status.saves,
        status.saves_after_turn,
        status.restores
    );
    rt.block_on(engine.shutdown(20_000));
    rt.block_on(fake.shutdown());
}
