//! A schedule's run refused by the day budget: nothing runs, and the run reads `failed` with
//! the budget's words, through a real engine and the scheduler.

use crate::api::Backend;
use crate::config::Config;
use crate::engine::{Engine, EngineParts, ToolSource};
use crate::llama::ServerInfo;
use crate::llama::tests::support::Fake;
use crate::schedule::{Paths, Scheduler, SystemClock, specs};
use crate::session::Store;
use crate::tools::{FakeTools, Registry};
use bxcore::{SessionId, TurnEnd, TurnEvent};
use proto::api::{RunOutcome, TaskRequest};
use std::sync::Arc;
use std::time::Duration;

/// The longest the test waits for anything, in milliseconds.
const WAIT_MS: u64 = 20_000;

#[test]
fn a_scheduled_run_refused_by_the_day_budget_reads_failed_with_the_budgets_words() {
    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("system.md"), "You are a test.").unwrap();
    let mut cfg = Config {
        state_dir: state.path().join("state"),
        ..Config::default()
    };
    std::fs::create_dir(&cfg.state_dir).unwrap();
    cfg.baseline.system = state.path().join("system.md");
    cfg.budgets.max_generated_tokens_per_day = Some(1);
    let schedule: crate::config::Schedule = serde_json::from_value(serde_json::json!({
        "name": "report", "every": "50ms", "task": "Write the report."
    }))
    .unwrap();
    cfg.schedules.push(schedule);
    let fake = Fake::script(r#"default_reply = "a reply of several tokens""#);
    let engine = Engine::new(EngineParts {
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
        meter: Arc::new(crate::meter::Meter::load(&cfg, crate::meter::system_clock()).unwrap()),
    });
    fake.rt.block_on(async {
        // A task spends the day's one token.
        let task = TaskRequest {
            session: Some(SessionId::new("chat").unwrap()),
            text: "hello".into(),
            task_id: None,
            overheard: Vec::new(),
        };
        let mut submitted = engine.submit(task).await.unwrap();
        let mut end = None;
        while let Some(event) = submitted.events.recv().await {
            if let TurnEvent::Ended { end: e, .. } = event {
                end = Some(e);
            }
        }
        assert!(matches!(end, Some(TurnEnd::Budget { .. })), "{end:?}");
        let scheduler = Scheduler::start(
            Arc::new(engine.clone()),
            specs(&cfg).unwrap(),
            Paths::of(&cfg),
            Arc::new(SystemClock),
            crate::meter::ScheduleRuns::default(),
        )
        .unwrap();
        // Every run is refused, one each 50 ms: wait (bounded) for a moment between two, when
        // the last run reads its outcome rather than `running` (the next may have begun by the
        // time the first one's end is counted).
        let run = tokio::time::timeout(Duration::from_millis(WAIT_MS), async {
            loop {
                let last = scheduler
                    .list()
                    .schedules
                    .iter()
                    .find(|s| s.name == "report")
                    .and_then(|s| s.last_run.clone());
                if let Some(run) = last.filter(|r| r.outcome != RunOutcome::Running) {
                    return run;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("a run was tried in time");
        scheduler.stop().await;
        engine.shutdown(WAIT_MS).await;
        match run.outcome {
            RunOutcome::Failed { reason } => {
                assert!(
                    reason.starts_with("the day's budget is spent: 1 tokens were generated today")
                        && reason.contains("max_generated_tokens_per_day is 1"),
                    "{reason}"
                );
            }
            other => panic!("expected failed, got {other:?}"),
        }
        assert_eq!(run.turn, None, "nothing ran");
    });
}
