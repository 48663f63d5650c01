#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The day budget at the engine: a new task is refused with 429 once the day's tokens are
//! spent (naming the budget, the figure and when the day turns), a task that waited while the
//! day was spent is refused when its turn comes, and the day counts what turns generated. A
//! turn that ends at a budget leaves its session to the next task.

use crate::api::{ApiFailure, Backend, Submitted};
use crate::budget::{MAX_GENERATED_TOKENS_PER_DAY, MAX_TOOL_CALLS_PER_TURN};
use crate::config::Config;
use crate::engine::Engine;
use crate::llama::tests::support::Fake;
use crate::tools::ToolPort;
use bxcore::{DataClass, SessionId, TurnEnd, TurnEvent};
use proto::api::TaskRequest;
use proto::{ToolRequest, ToolResponse};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest a test waits for anything, in milliseconds.
const WAIT_MS: u64 = 20_000;

/// "LONG" is answered at length; "echo" calls echo (twice per answer with "twice"); anything
/// else "done".
fn script() -> String {
    format!(
        r#"default_reply = "done"
[[rule]]
when_role = "user"
when_contains = "LONG"
reply = "{long}"
[[rule]]
when_role = "user"
when_contains = "twice"
times = 1
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\":\"echo\",\"arguments\":{{\"text\":\"a\"}}}}" }}, {{ name = "call_tool", arguments = "{{\"name\":\"echo\",\"arguments\":{{\"text\":\"b\"}}}}" }}]
[[rule]]
when_role = "user"
when_contains = "echo"
times = 1
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\":\"echo\",\"arguments\":{{\"text\":\"a\"}}}}" }}]
"#,
        long = "word ".repeat(300)
    )
}

/// A port that tells the test when a call arrives and answers only once the test lets it.
struct Gate {
    arrived: Mutex<Sender<()>>,
    release: Mutex<Receiver<()>>,
}

impl ToolPort for Gate {
    fn call(&self, _request: &ToolRequest) -> ToolResponse {
        let _ = self.arrived.lock().unwrap().send(());
        let released = self
            .release
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_millis(WAIT_MS));
        assert!(released.is_ok(), "the test never let the call go");
        ToolResponse::Result {
            content: "page".into(),
            class: DataClass::Public,
            untrusted: false,
            truncated: false,
        }
    }
}

struct Bed {
    fake: Fake,
    engine: Engine,
    _state: tempfile::TempDir,
}

impl Bed {
    fn new(tweak: impl FnOnce(&mut Config), port: Arc<dyn ToolPort>) -> Bed {
        let state = tempfile::tempdir().unwrap();
        let mut cfg = Config {
            state_dir: state.path().join("state"),
            ..Config::default()
        };
        std::fs::create_dir(&cfg.state_dir).unwrap();
        cfg.baseline.system = state.path().join("system.md");
        std::fs::write(&cfg.baseline.system, "You are a test.").unwrap();
        tweak(&mut cfg);
        let fake = Fake::script(&script());
        let engine = super::engine_over(&fake, &cfg, port);
        Bed {
            fake,
            engine,
            _state: state,
        }
    }

    fn task(session: &str, text: &str) -> TaskRequest {
        TaskRequest {
            session: Some(SessionId::new(session).unwrap()),
            text: text.into(),
            task_id: None,
            overheard: Vec::new(),
        }
    }

    fn submit(&self, session: &str, text: &str) -> Result<Submitted, ApiFailure> {
        self.fake.rt.block_on(bounded(
            self.engine.submit(Bed::task(session, text)),
            "the answer to a task",
        ))
    }

    fn end_of(&self, mut submitted: Submitted) -> TurnEnd {
        self.fake.rt.block_on(bounded(
            async {
                while let Some(event) = submitted.events.recv().await {
                    if let TurnEvent::Ended { end, .. } = event {
                        return end;
                    }
                }
                panic!("the events ended without an ended event")
            },
            "the turn's end",
        ))
    }
}

async fn bounded<F: std::future::Future>(future: F, what: &str) -> F::Output {
    tokio::time::timeout(Duration::from_millis(WAIT_MS), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not come within {WAIT_MS} ms"))
}

fn over_budget(result: Result<Submitted, ApiFailure>) -> String {
    match result {
        Err(ApiFailure::OverBudget(why)) => why,
        Err(other) => panic!("expected a budget refusal, got {other:?}"),
        Ok(submitted) => panic!(
            "expected a budget refusal, got turn {}",
            submitted.accepted.turn
        ),
    }
}

#[test]
fn once_a_turn_spent_the_day_a_new_task_is_refused_until_the_day_turns() {
    let bed = Bed::new(
        |cfg| cfg.budgets.max_generated_tokens_per_day = Some(40),
        Arc::new(crate::tools::FakeTools::new()),
    );
    // A task within the budget runs, and its tokens count.
    let first = bed.submit("a", "hello").unwrap();
    assert_eq!(bed.end_of(first), TurnEnd::Done);
    let after_first = bed.engine.inner.generated_today();
    assert!(after_first > 0 && after_first < 40, "{after_first}");
    // A long answer is cut where the day's budget ends, and its turn ends there.
    let long = bed.submit("a", "LONG").unwrap();
    match bed.end_of(long) {
        TurnEnd::Budget { budget, message } => {
            assert_eq!(budget, MAX_GENERATED_TOKENS_PER_DAY);
            assert!(
                message.starts_with("40 tokens were generated today (UTC)"),
                "{message}"
            );
        }
        other => panic!("expected a budget end, got {other:?}"),
    }
    assert_eq!(bed.engine.inner.generated_today(), 40);
    // Any new task now, on any session, is refused with the budget, its figure and the
    // next midnight (UTC).
    let why = over_budget(bed.submit("b", "hello"));
    let midnight = chrono::Utc::now()
        .date_naive()
        .succ_opt()
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap()
        .and_utc();
    assert_eq!(
        why,
        format!(
            "the day's budget is spent: 40 tokens were generated today (UTC) by all sessions; \
             max_generated_tokens_per_day is 40; the day turns at {}; new tasks are refused \
             until then",
            midnight.to_rfc3339()
        )
    );
    // A schedule's run goes through the same door.
    let unattended = bed
        .fake
        .rt
        .block_on(bed.engine.submit_unattended(Bed::task("c", "hello")));
    over_budget(unattended);
}

#[test]
fn a_task_that_waited_while_the_day_was_spent_is_refused_when_its_turn_comes() {
    let (arrived_tx, arrived) = channel();
    let (release, release_rx) = channel();
    let gate = Arc::new(Gate {
        arrived: Mutex::new(arrived_tx),
        release: Mutex::new(release_rx),
    });
    let bed = Bed::new(
        |cfg| cfg.budgets.max_generated_tokens_per_day = Some(1_000_000),
        gate,
    );
    let first = bed.submit("s", "echo").unwrap();
    arrived
        .recv_timeout(Duration::from_millis(WAIT_MS))
        .unwrap();
    // A second task for the busy session waits on its lane.
    let engine = bed.engine.clone();
    let waiting = bed
        .fake
        .rt
        .spawn(async move { engine.submit(Bed::task("s", "hello")).await });
    bed.fake.rt.block_on(bounded(
        async {
            loop {
                let queued = bed.engine.sessions().unwrap().sessions[0].queued;
                if queued == 1 {
                    return;
                }
                tokio::task::yield_now().await;
            }
        },
        "the second task's place on the lane",
    ));
    // Meanwhile other sessions spend the day.
    let others = proto::api::UsageTotals {
        generated_tokens: 1_000_000,
        ..proto::api::UsageTotals::default()
    };
    let elsewhere = bxcore::SessionId::new("elsewhere").unwrap();
    bed.engine.inner.parts.meter.add(&elsewhere, &others);
    release.send(()).unwrap();
    // The running turn ends at the day budget at its next model call...
    match bed.end_of(first) {
        TurnEnd::Budget { budget, .. } => assert_eq!(budget, MAX_GENERATED_TOKENS_PER_DAY),
        other => panic!("expected a budget end, got {other:?}"),
    }
    // ...and the waiting task is refused when its turn comes.
    let waited = bed
        .fake
        .rt
        .block_on(bounded(waiting, "the waiting task's answer"))
        .unwrap();
    let why = over_budget(waited);
    assert!(
        why.contains("max_generated_tokens_per_day is 1000000"),
        "{why}"
    );
}

#[test]
fn a_turn_that_ends_at_a_budget_leaves_its_session_to_the_next_task() {
    let bed = Bed::new(
        |cfg| cfg.budgets.turn.max_tool_calls_per_turn = Some(1),
        Arc::new(crate::tools::FakeTools::new()),
    );
    let first = bed.submit("s", "twice").unwrap();
    match bed.end_of(first) {
        TurnEnd::Budget { budget, message } => {
            assert_eq!(budget, MAX_TOOL_CALLS_PER_TURN);
            assert_eq!(
                message,
                "the turn asked for tool call 2; max_tool_calls_per_turn is 1"
            );
        }
        other => panic!("expected a budget end, got {other:?}"),
    }
    let next = bed.submit("s", "echo").unwrap();
    assert_eq!(next.accepted.turn, 2);
    assert_eq!(bed.end_of(next), TurnEnd::Done);
}

#[test]
fn a_named_task_that_already_ran_is_answered_with_its_turn_though_the_day_is_spent() {
    let bed = Bed::new(
        |cfg| cfg.budgets.max_generated_tokens_per_day = Some(40),
        Arc::new(crate::tools::FakeTools::new()),
    );
    let named = |task_id: &str| TaskRequest {
        session: Some(SessionId::new("a").unwrap()),
        text: "hello".into(),
        task_id: Some(bxcore::TaskId::new(task_id).unwrap()),
        overheard: Vec::new(),
    };
    let submit = |request| {
        bed.fake
            .rt
            .block_on(bounded(bed.engine.submit(request), "the answer to a task"))
    };
    let first = submit(named("t-1")).unwrap();
    let turn = first.accepted.turn;
    assert_eq!(bed.end_of(first), TurnEnd::Done);
    let long = bed.submit("a", "LONG").unwrap();
    assert!(matches!(bed.end_of(long), TurnEnd::Budget { .. }));
    assert_eq!(bed.engine.inner.generated_today(), 40);
    // The same task again: its client asks what became of it, and runs nothing new.
    let again = submit(named("t-1"))
        .unwrap_or_else(|e| panic!("a resubmission of a task that ran was refused: {e:?}"));
    assert_eq!(again.accepted.turn, turn);
    assert_eq!(again.accepted.end, Some(TurnEnd::Done));
    // A task named anew is a new task: refused for the day.
    over_budget(submit(named("t-2")));
    // And on a session that does not exist, refused at once, writing nothing.
    let elsewhere = TaskRequest {
        session: Some(SessionId::new("z").unwrap()),
        ..named("t-3")
    };
    over_budget(submit(elsewhere));
    assert!(
        !bed.engine
            .inner
            .parts
            .store
            .exists(&SessionId::new("z").unwrap())
    );
}
