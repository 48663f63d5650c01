//! How soon a task starts on a big session: the time from submitting a task to its
//! acknowledgement (its user record durable) on a session of 100 000 records, through a real
//! engine over fakellama. The first task opens the session (reads and verifies its whole log);
//! later ones start from the session the engine kept open (issue 14).
//!
//! `cargo bench -p loopd --bench task_start` (the session is written to `/dev/shm` where the
//! system has one, so making it is quick; the opens and acknowledgements are what is timed).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

#[path = "support/records.rs"]
mod records;

use bxcore::{SessionId, TurnEvent};
use loopd::api::{Backend, Submitted};
use loopd::blocking::Blocking;
use loopd::config::Config;
use loopd::engine::{Engine, EngineParts, ToolSource};
use loopd::llama::{Client, ClientOptions, ServerInfo};
use loopd::meter::{Meter, system_clock};
use loopd::session::Store;
use loopd::tools::{FakeTools, Registry};
use proto::api::TaskRequest;
use records::tool_result;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Records in the session the tasks run on.
const RECORDS: u64 = 100_000;
/// Tasks timed after the first.
const KEPT_TASKS: usize = 9;
/// The longest any wait may take.
const WAIT: Duration = Duration::from_secs(60);

fn state_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

/// Submits a task on `id` and returns how long its acknowledgement took, and the submission.
fn submit(rt: &tokio::runtime::Runtime, engine: &Engine, id: &str) -> (Duration, Submitted) {
    let task: TaskRequest =
        serde_json::from_value(serde_json::json!({"session": id, "text": "hello"})).unwrap();
    let started = Instant::now();
    let submitted = rt
        .block_on(async { tokio::time::timeout(WAIT, engine.submit(task)).await })
        .unwrap()
        .unwrap();
    (started.elapsed(), submitted)
}

/// Waits for the turn's end, then for its lane to be idle (its session kept open).
fn finish(rt: &tokio::runtime::Runtime, engine: &Engine, id: &SessionId, mut s: Submitted) {
    rt.block_on(async {
        tokio::time::timeout(WAIT, async {
            while let Some(event) = s.events.recv().await {
                if matches!(event, TurnEvent::Ended { .. }) {
                    return;
                }
            }
        })
        .await
    })
    .unwrap();
    let deadline = Instant::now() + WAIT;
    while engine
        .sessions()
        .unwrap()
        .sessions
        .iter()
        .any(|s| &s.id == id && s.busy)
    {
        assert!(Instant::now() < deadline, "the lane never became idle");
        std::thread::yield_now();
    }
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
            ..Default::default()
        }))
        .unwrap();
    let state = state_dir();
    let id = SessionId::new("big").unwrap();
    {
        let store = Store::new(state.path()).unwrap();
        let mut session = store.create(&id).unwrap();
        for n in 1..RECORDS {
            session.append(tool_result(n)).unwrap();
        }
    }
    let cfg = Config {
        state_dir: state.path().to_path_buf(),
        ..Config::default()
    };
    let engine = Engine::new(EngineParts {
        cfg: cfg.clone(),
        store: Store::new(state.path()).unwrap(),
        port: Arc::new(FakeTools::new()),
        tools: ToolSource::Fake(Registry::m2b()),
        system: "You are a benchmark.".into(),
        models: Arc::new(loopd::route::Router::single(
            Client::new(ClientOptions::for_url(&fake.url()).unwrap()),
            &loopd::config::Slots::default(),
            ServerInfo {
                n_ctx: 1 << 20,
                total_slots: fakellama::DEFAULT_SLOTS,
                model: "fakellama".into(),
                model_path: String::new(),
                build_info: String::new(),
            },
        )),
        blocking: Blocking::new(rt.handle().clone()),
        meter: Arc::new(Meter::load(&cfg, system_clock()).unwrap()),
    });
    let (first, submitted) = submit(&rt, &engine, "big");
    finish(&rt, &engine, &id, submitted);
    let mut kept: Vec<Duration> = (0..KEPT_TASKS)
        .map(|_| {
            let (took, submitted) = submit(&rt, &engine, "big");
            finish(&rt, &engine, &id, submitted);
            took
        })
        .collect();
    kept.sort();
    println!(
        "task_start/first_task_100k_records (opens the log): {:.1} ms",
        first.as_secs_f64() * 1000.0
    );
    println!(
        "task_start/later_task_100k_records (kept open): median {:.2} ms, max {:.2} ms over {KEPT_TASKS}",
        kept[KEPT_TASKS / 2].as_secs_f64() * 1000.0,
        kept[KEPT_TASKS - 1].as_secs_f64() * 1000.0
    );
}
