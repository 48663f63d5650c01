#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A schedule with `session = "new"` never appends its run to a session someone else made
//! first, through a real engine and the scheduler: a client that reads the run's session id
//! as the run starts (`GET /v1/schedules`) and sends a task there before the run's own task
//! is queued does not get the run into its session: the run fails, saying why.

use crate::api::{ApiFailure, Backend};
use crate::config::Config;
use crate::engine::{Engine, EngineParts, ToolSource};
use crate::llama::ServerInfo;
use crate::llama::tests::support::Fake;
use crate::schedule::{Paths, Scheduler, SystemClock, specs};
use crate::session::Store;
use crate::tools::{FakeTools, Registry};
use bxcore::{LogRecord, SessionId, TurnEvent};
use proto::api::{RunOutcome, ScheduleRun, TaskRequest};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// The longest the test waits for anything, in milliseconds.
const WAIT_MS: u64 = 20_000;

/// An engine over `fake` with `cfg`.
fn engine(fake: &Fake, cfg: &Config) -> Engine {
    Engine::new(EngineParts {
        cfg: cfg.clone(),
        store: Store::new(&cfg.state_dir).unwrap(),
        port: Arc::new(FakeTools::new()),
        tools: ToolSource::Fake(Registry::m2b()),
        system: "You are a test.".into(),
        models: Arc::new(crate::route::Router::single(
            fake.client(),
            &crate::config::Slots::default(),
            ServerInfo {
                n_ctx: fakellama::DEFAULT_N_CTX,
                total_slots: 1,
                model: "fakellama".into(),
                model_path: String::new(),
                build_info: String::new(),
            },
        )),
        blocking: fake.blocking(),
        meter: Arc::new(crate::meter::Meter::load(cfg, crate::meter::system_clock()).unwrap()),
    })
}

/// The last run of schedule `name`, once `ready` holds of it (bounded).
async fn last_run(
    scheduler: &Scheduler<Engine>,
    name: &str,
    ready: impl Fn(&ScheduleRun) -> bool,
) -> ScheduleRun {
    let found = tokio::time::timeout(Duration::from_millis(WAIT_MS), async {
        loop {
            let run = scheduler
                .list()
                .schedules
                .into_iter()
                .find(|s| s.name == name)
                .and_then(|s| s.last_run);
            if let Some(run) = run.filter(&ready) {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    found.await.expect("the run got there in time")
}

#[test]
fn a_client_that_makes_the_runs_session_first_does_not_get_the_run_into_it() {
    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("system.md"), "You are a test.").unwrap();
    // The run reads its task from a FIFO: it waits there, after its session id is shown and
    // before its task is queued, until the test has played the client.
    let fifo = state.path().join("task.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let mut cfg = Config {
        state_dir: state.path().join("state"),
        ..Config::default()
    };
    std::fs::create_dir(&cfg.state_dir).unwrap();
    cfg.baseline.system = state.path().join("system.md");
    let schedule: crate::config::Schedule = serde_json::from_value(serde_json::json!({
        "name": "report", "every": "24h", "task_file": fifo, "session": "new"
    }))
    .unwrap();
    cfg.schedules.push(schedule);
    let fake = Fake::script(r#"default_reply = "done""#);
    let engine = engine(&fake, &cfg);
    // The FIFO's writer, on a thread of its own: it opens the FIFO (once the run opens it to
    // read) and writes the task when told, or closes it without when the test failed first,
    // so a failing test ends rather than leaving the run's read, and the runtime, waiting.
    let (go, told) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        let mut pipe = std::fs::OpenOptions::new().write(true).open(&fifo)?;
        if told.recv().is_ok() {
            pipe.write_all(b"Write the report.")?;
        }
        Ok::<(), std::io::Error>(())
    });
    fake.rt.block_on(async {
        let scheduler = Arc::new(
            Scheduler::start(
                Arc::new(engine.clone()),
                specs(&cfg).unwrap(),
                Paths::of(&cfg),
                Arc::new(SystemClock),
                crate::meter::ScheduleRuns::default(),
            )
            .unwrap(),
        );
        let manual = tokio::spawn({
            let scheduler = Arc::clone(&scheduler);
            async move { scheduler.run_now("report").await }
        });
        let run = last_run(&scheduler, "report", |r| r.outcome == RunOutcome::Running).await;
        let session = run.session.clone();
        assert!(
            session.as_str().starts_with("report-") && session.as_str().len() == 38,
            "<name>-<due time>-<14 random hex digits>: {session}"
        );
        // The client, who read the id, makes that session with a task of its own.
        let mine = TaskRequest {
            session: Some(session.clone()),
            text: "I was here first".into(),
            task_id: None,
            overheard: Vec::new(),
        };
        let mut submitted = engine.submit(mine).await.unwrap();
        while let Some(event) = submitted.events.recv().await {
            if matches!(event, TurnEvent::Ended { .. }) {
                break;
            }
        }
        // Now the run reads its task and submits it.
        go.send(()).unwrap();
        let answer = tokio::time::timeout(Duration::from_millis(WAIT_MS), manual)
            .await
            .expect("the manual run answered in time")
            .unwrap();
        assert!(
            matches!(&answer, Err(ApiFailure::Forbidden(why)) if why.contains("exists already")),
            "{answer:?}"
        );
        let run = last_run(&scheduler, "report", |r| r.outcome != RunOutcome::Running).await;
        assert!(
            matches!(&run.outcome, RunOutcome::Failed { reason } if reason.contains("exists already")),
            "{run:?}"
        );
        assert_eq!(run.turn, None, "the run never ran");
        scheduler.stop().await;
        engine.shutdown(WAIT_MS).await;
        let tasks: Vec<String> = Store::new(&cfg.state_dir)
            .unwrap()
            .read(&SessionId::new(session.as_str()).unwrap())
            .unwrap()
            .into_iter()
            .filter_map(|r| match r {
                LogRecord::User { content, .. } => Some(content),
                _ => None,
            })
            .collect();
        assert_eq!(tasks, ["I was here first"], "only the client's task");
    });
    writer.join().unwrap().unwrap();
}
