#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Approvals through a real engine and its `Backend` (issue 16): turns waiting for the owner
//! give the one main slot back, so two sessions wait at once and are answered in either
//! order; the desk lists them oldest first, refuses an over-long reason and an id nothing
//! waits under; a shutdown makes a waiting call void and ends its turn as interrupted.

use crate::api::{ApiFailure, Backend, Submitted};
use crate::config::Config;
use crate::engine::Engine;
use crate::llama::tests::support::Fake;
use crate::session::Store;
use crate::tools::tests::asking::{ASKED_TOOL, AskingPort, HELD_ARGUMENTS};
use bxcore::{ApprovalDecision, ApprovalId, LogRecord, SessionId, TurnEnd, TurnEvent};
use proto::api::{ApprovalAnswer, MAX_DENY_REASON_BYTES, OwnerAnswer, TaskRequest};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a test waits for anything, in milliseconds.
const WAIT_MS: u64 = 20_000;

/// How long the model takes to answer a task with "slow", in milliseconds.
const SLOW_MS: u64 = 10_000;

/// A task with "save" calls `echo` through `call_tool`, one with "hold" calls it with
/// `HELD_ARGUMENTS` (which runs until the test lets it end), one with "slow" is answered "done"
/// after [`SLOW_MS`]; anything else is answered "done" at once.
const SCRIPT: &str = r#"default_reply = "done"
[[rule]]
when_role = "user"
when_contains = "slow"
reply = "done"
delay_ms = 10000
[[rule]]
when_role = "user"
when_contains = "save"
tool_calls = [{ name = "call_tool", arguments = "{\"name\":\"echo\",\"arguments\":{\"text\":\"note\"}}" }]
[[rule]]
when_role = "user"
when_contains = "hold"
tool_calls = [{ name = "call_tool", arguments = "{\"name\":\"echo\",\"arguments\":{\"text\":\"hold\"}}" }]
"#;

struct Bed {
    fake: Fake,
    engine: Engine,
    store: Store,
    port: Arc<AskingPort>,
    _state: tempfile::TempDir,
}

impl Bed {
    fn new() -> Bed {
        Bed::build(false)
    }

    /// A bed whose sessions keep their KV caches in files (fakellama's `--slot-save-path`).
    fn build(kv: bool) -> Bed {
        let state = tempfile::tempdir().unwrap();
        let mut cfg = Config {
            state_dir: state.path().join("state"),
            ..Config::default()
        };
        std::fs::create_dir(&cfg.state_dir).unwrap();
        cfg.baseline.system = state.path().join("system.md");
        cfg.approvals.timeout_ms = WAIT_MS;
        std::fs::write(&cfg.baseline.system, "You are a test.").unwrap();
        let kv_dir = cfg.state_dir.join("kv");
        std::fs::create_dir(&kv_dir).unwrap();
        let fake = Fake::start(fakellama::Options {
            script: fakellama::Script::parse(SCRIPT).unwrap(),
            slot_save_path: kv.then(|| kv_dir.clone()),
            ..Default::default()
        });
        let port = Arc::new(AskingPort::new());
        let info = crate::llama::ServerInfo {
            n_ctx: fakellama::DEFAULT_N_CTX,
            total_slots: fakellama::DEFAULT_SLOTS,
            model: "fakellama".into(),
            model_path: String::new(),
            build_info: String::new(),
        };
        let files = kv
            .then(|| crate::kv::SlotFiles::open(&cfg.kv, &cfg.state_dir, &info).unwrap())
            .flatten();
        let engine = super::engine_with_kv(&fake, &cfg, port.clone(), files);
        Bed {
            fake,
            store: Store::new(&cfg.state_dir).unwrap(),
            engine,
            port,
            _state: state,
        }
    }

    /// Submits `text` on `session`: acknowledged once its turn holds the main slot.
    fn submit(&self, session: &str, text: &str) -> Submitted {
        let task = TaskRequest {
            session: Some(SessionId::new(session).unwrap()),
            text: text.into(),
            task_id: None,
            overheard: Vec::new(),
        };
        self.fake
            .rt
            .block_on(bounded(self.engine.submit(task), "the acknowledgement"))
            .unwrap()
    }

    /// Reads `submitted`'s events until it asks the owner; the approval's id.
    fn asked(&self, submitted: &mut Submitted) -> ApprovalId {
        self.fake.rt.block_on(bounded(
            async {
                while let Some(event) = submitted.events.recv().await {
                    match event {
                        TurnEvent::ApprovalRequested { approval, .. } => return approval,
                        TurnEvent::Ended { end, .. } => panic!("ended {end:?} without asking"),
                        _ => {}
                    }
                }
                panic!("the events ended before the turn asked")
            },
            "the request",
        ))
    }

    /// How the turn of `submitted` ends.
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

    fn answer(
        &self,
        id: &ApprovalId,
        answer: OwnerAnswer,
        reason: Option<String>,
        uid: u32,
    ) -> Result<ApprovalDecision, ApiFailure> {
        let answer = ApprovalAnswer { answer, reason };
        self.fake
            .rt
            .block_on(bounded(
                self.engine.answer_approval(id, answer, Some(uid)),
                "the answer",
            ))
            .map(|answered| answered.decision)
    }

    /// (decision, uid, reason) of each approval decided in `session`.
    fn decisions(&self, session: &str) -> Vec<(ApprovalDecision, Option<u32>, Option<String>)> {
        self.store
            .read(&SessionId::new(session).unwrap())
            .unwrap()
            .into_iter()
            .filter_map(|r| match r {
                LogRecord::ApprovalDecided {
                    decision,
                    uid,
                    reason,
                    ..
                } => Some((decision, uid, reason)),
                _ => None,
            })
            .collect()
    }
}

async fn bounded<F: std::future::Future>(future: F, what: &str) -> F::Output {
    tokio::time::timeout(Duration::from_millis(WAIT_MS), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not come within {WAIT_MS} ms"))
}

#[test]
fn two_sessions_wait_at_once_on_one_main_slot_and_are_answered_out_of_order() {
    let bed = Bed::new();
    let mut a = bed.submit("a", "save a note");
    let first = bed.asked(&mut a);
    // b's task is acknowledged only once its turn holds the one main slot: a gave it back.
    let mut b = bed.submit("b", "save a note");
    let second = bed.asked(&mut b);
    let listed = bed.engine.approvals().unwrap().approvals;
    let ids: Vec<(&str, &str)> = listed
        .iter()
        .map(|p| (p.id.as_str(), p.session.as_str()))
        .collect();
    assert_eq!(ids, [(first.as_str(), "a"), (second.as_str(), "b")]);
    assert!(listed.iter().all(|p| p.tool == ASKED_TOOL));

    // A reason longer than the model may read is refused, and the call still waits.
    let long = "x".repeat(MAX_DENY_REASON_BYTES + 1);
    assert!(matches!(
        bed.answer(&first, OwnerAnswer::Deny, Some(long), 1000),
        Err(ApiFailure::BadRequest(_))
    ));
    let unknown = ApprovalId::new("ap-never").unwrap();
    assert!(matches!(
        bed.answer(&unknown, OwnerAnswer::Approve, None, 1000),
        Err(ApiFailure::NotFound(_))
    ));
    assert_eq!(bed.engine.approvals().unwrap().approvals.len(), 2);

    // The later one first: it takes the main slot again and ends.
    assert_eq!(
        bed.answer(&second, OwnerAnswer::Approve, None, 1001),
        Ok(ApprovalDecision::Approved)
    );
    assert_eq!(bed.end_of(b), TurnEnd::Done);
    assert_eq!(
        bed.answer(&first, OwnerAnswer::Deny, Some("not this one".into()), 1002),
        Ok(ApprovalDecision::Denied)
    );
    assert_eq!(bed.end_of(a), TurnEnd::Done);

    assert_eq!(
        bed.decisions("b"),
        [(ApprovalDecision::Approved, Some(1001), None)]
    );
    assert_eq!(
        bed.decisions("a"),
        [(
            ApprovalDecision::Denied,
            Some(1002),
            Some("not this one".into())
        )]
    );
    // Answered: nothing waits, and a second answer finds nothing.
    assert!(bed.engine.approvals().unwrap().approvals.is_empty());
    assert!(matches!(
        bed.answer(&second, OwnerAnswer::Approve, None, 1001),
        Err(ApiFailure::NotFound(_))
    ));
    let sent_with_approval = bed
        .port
        .requests()
        .iter()
        .filter(|r| r.approval.is_some())
        .count();
    assert_eq!(sent_with_approval, 1, "only b's call ran");
}

#[test]
fn a_shutdown_makes_a_waiting_call_void_and_ends_its_turn_interrupted() {
    let bed = Bed::new();
    let mut a = bed.submit("a", "save a note");
    let id = bed.asked(&mut a);
    bed.fake
        .rt
        .block_on(bounded(bed.engine.shutdown(WAIT_MS), "the shutdown"));
    assert_eq!(bed.end_of(a), TurnEnd::Interrupted);
    assert_eq!(
        bed.decisions("a"),
        [(
            ApprovalDecision::Void,
            None,
            Some(crate::turn::SHUTTING_DOWN.into())
        )]
    );
    assert!(matches!(
        bed.answer(&id, OwnerAnswer::Approve, None, 1000),
        Err(ApiFailure::NotFound(_))
    ));
    assert_eq!(bed.port.requests().len(), 1, "never sent again");
}

#[test]
fn the_desk_holds_at_most_max_waiting_approvals_and_each_id_once() {
    use crate::engine::approvals::{Desk, MAX_WAITING_APPROVALS};
    let desk = Desk::default();
    let pending = |n: usize| proto::api::PendingApproval {
        id: ApprovalId::new(&format!("ap-{n}")).unwrap(),
        session: SessionId::new("s").unwrap(),
        turn: 1,
        call: bxcore::CallId(n as u64),
        tool: ASKED_TOOL.into(),
        arguments: "{}".into(),
        reason: "asks".into(),
        class: bxcore::DataClass::Public,
        untrusted: false,
        asked: bxcore::Timestamp::now(),
        timeout_ms: 1,
    };
    let mut receivers = Vec::new();
    for n in 0..MAX_WAITING_APPROVALS {
        receivers.push(desk.put(pending(n)).unwrap());
    }
    let why = desk.put(pending(MAX_WAITING_APPROVALS)).unwrap_err();
    assert!(why.contains("MAX_WAITING_APPROVALS"), "{why}");
    assert!(desk.withdraw(&ApprovalId::new("ap-0").unwrap()));
    assert!(!desk.withdraw(&ApprovalId::new("ap-0").unwrap()));
    let why = desk.put(pending(1)).unwrap_err();
    assert!(why.contains("ap-1 already waits"), "{why}");
    desk.put(pending(MAX_WAITING_APPROVALS)).unwrap();
    let listed = desk.list().approvals;
    assert_eq!(listed.len(), MAX_WAITING_APPROVALS);
    assert_eq!(listed[0].id.as_str(), "ap-1", "oldest first");
    assert_eq!(
        listed.last().unwrap().id.as_str(),
        format!("ap-{MAX_WAITING_APPROVALS}")
    );
}

/// (prompt, cached) tokens of each model call of `session`.
fn calls(bed: &Bed, session: &str) -> Vec<(u64, u64)> {
    bed.store
        .read(&SessionId::new(session).unwrap())
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::Assistant { usage: Some(u), .. } => Some((u.prompt_tokens, u.cached_tokens)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_turn_that_waited_for_the_owner_gets_its_cache_back_after_another_session_used_the_slot() {
    for kv in [true, false] {
        let bed = Bed::build(kv);
        let mut a = bed.submit("a", "save a note");
        let asked = bed.asked(&mut a);
        // While a waits, b's turn runs on the one main slot.
        let b = bed.submit("b", "hello");
        assert_eq!(bed.end_of(b), TurnEnd::Done);
        assert_eq!(
            bed.answer(&asked, OwnerAnswer::Approve, None, 1000),
            Ok(ApprovalDecision::Approved)
        );
        assert_eq!(bed.end_of(a), TurnEnd::Done);
        let calls = calls(&bed, "a");
        assert_eq!(calls.len(), 2, "{calls:?}");
        // The call after the approval reuses the whole prompt of the one before it, only
        // when a's cache came back from its file.
        assert_eq!(calls[1].1 >= calls[0].0, kv, "kv {kv}: {calls:?}");
    }
}

/// Waits until `holds()` (at most [`WAIT_MS`]), failing with `what`.
fn until(what: &str, mut holds: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while !holds() {
        assert!(Instant::now() < deadline, "{what} within {WAIT_MS} ms");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn an_approved_call_runs_and_is_recorded_while_another_session_holds_the_main_slot() {
    // Issue 33: the approved call went to brokerd only once its turn had its main slot again,
    // so a loopd stopped while another session's turn held it lost the call unrun and untold.
    let bed = Bed::new();
    let mut a = bed.submit("a", "save a note");
    let asked = bed.asked(&mut a);
    // b's task is acknowledged once its turn holds the one main slot a gave back; its model
    // call then takes SLOW_MS, and the slot stays b's until it ends.
    let mut b = bed.submit("b", "slow down");
    assert_eq!(
        bed.answer(&asked, OwnerAnswer::Approve, None, 1000),
        Ok(ApprovalDecision::Approved)
    );
    // The call runs, and its result is durable, while b still holds the slot.
    until("a's approved call ran and its result is in a's log", || {
        bed.store
            .read(&SessionId::new("a").unwrap())
            .unwrap()
            .iter()
            .any(|r| {
                matches!(
                    r,
                    LogRecord::ToolResult {
                        outcome: bxcore::ToolOutcome::Ok,
                        ..
                    }
                )
            })
    });
    let with_approval = |port: &AskingPort| {
        port.requests()
            .iter()
            .filter(|r| r.approval.is_some())
            .count()
    };
    assert_eq!(with_approval(&bed.port), 1);
    let b_ended = std::iter::from_fn(|| b.events.try_recv().ok())
        .any(|e| matches!(e, TurnEvent::Ended { .. }));
    assert!(
        !b_ended,
        "b's model call of {SLOW_MS} ms is over: the check came too late"
    );
    assert_eq!(bed.end_of(b), TurnEnd::Done);
    assert_eq!(bed.end_of(a), TurnEnd::Done);
    assert_eq!(with_approval(&bed.port), 1, "sent once with its approval");
}

#[test]
fn turns_waiting_for_the_owner_hold_no_turn_worker() {
    // Issue 36: a turn waiting for the owner held its worker thread, so as many waiting turns
    // as the pool had workers stopped every other session's tasks.
    let bed = Bed::new();
    let workers = crate::engine::pool::turn_workers(&Config::default());
    let mut waiting = Vec::new();
    for n in 0..=workers {
        let mut submitted = bed.submit(&format!("w{n}"), "save a note");
        let asked = bed.asked(&mut submitted);
        waiting.push((submitted, asked));
    }
    // More turns wait than the pool has workers, and another session's task still runs.
    let other = bed.submit("other", "hello");
    assert_eq!(bed.end_of(other), TurnEnd::Done);
    for (submitted, asked) in waiting {
        assert_eq!(
            bed.answer(&asked, OwnerAnswer::Approve, None, 1000),
            Ok(ApprovalDecision::Approved)
        );
        assert_eq!(bed.end_of(submitted), TurnEnd::Done);
    }
    // The threads started in the waiting turns' places end once they are not needed.
    let ready = &bed.engine.inner.ready;
    until("the pool is back to its workers", || {
        ready.alive() == workers
    });
}

#[test]
fn a_turn_whose_tool_call_runs_gives_the_main_slot_to_another_session() {
    // Issue 36: a turn held its main slot while brokerd ran its call, so a long call (a fetch,
    // an `exec`) stopped every other session on that slot.
    let bed = Bed::new();
    let a = bed.submit("a", "hold the slot");
    until("a's call runs", || {
        bed.port
            .requests()
            .iter()
            .any(|r| r.arguments == HELD_ARGUMENTS)
    });
    let b = bed.submit("b", "hello");
    assert_eq!(bed.end_of(b), TurnEnd::Done);
    bed.port.release_held();
    assert_eq!(bed.end_of(a), TurnEnd::Done);
}
