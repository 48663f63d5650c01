#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Turns that wait for the owner (issue 16): a call brokerd asks about (the stand-in
//! `AskingPort`) is recorded, listed on the engine's desk and waited for; approved, it is sent
//! again with its approval; denied, timed out, cancelled or refused by brokerd, it does not
//! run and the model reads why. Each turn runs on its own thread with the desk's `TurnOwner`,
//! as the engine runs it; the test answers through the desk, as the API does.

use crate::api::ApiFailure;
use crate::config::Config;
use crate::engine::approvals::{Desk, TurnOwner};
use crate::heartbeat;
use crate::llama::tests::support::Fake;
use crate::session::{Session, Store};
use crate::tools::tests::asking::{self, ASKED_TOOL, AskingPort, FORGOTTEN, REASON};
use crate::tools::{Registry, ToolPort};
use crate::turn::{NO_OWNER, NoOwner, Owner, Runtime, Stop, TurnError, run_turn, start_turn};
use bxcore::{
    ApprovalDecision, ApprovalId, DataClass, DenyReason, LogRecord, SessionId, Timestamp,
    ToolOutcome, TurnEnd, TurnEvent,
};
use proto::ApprovalUse;
use proto::api::{ApprovalAnswer, ApprovalAnswered, OwnerAnswer};
use std::sync::{Arc, mpsc};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The longest a test waits for anything, and the turns' wait for the owner, in milliseconds.
const WAIT_MS: u64 = 20_000;
/// "save" calls `echo` once through `call_tool`; "twice" calls it twice with the same
/// arguments in one answer; anything else is answered "done".
const SCRIPT: &str = r#"default_reply = "done"
[[rule]]
when_role = "user"
when_contains = "save"
tool_calls = [{ name = "call_tool", arguments = "{\"name\":\"echo\",\"arguments\":{\"text\":\"note\"}}" }]
[[rule]]
when_role = "user"
when_contains = "twice"
tool_calls = [{ name = "call_tool", arguments = "{\"name\":\"echo\",\"arguments\":{\"text\":\"note\"}}" }, { name = "call_tool", arguments = "{\"name\":\"echo\",\"arguments\":{\"text\":\"note\"}}" }]
"#;
/// The arguments `echo` is called with.
const ARGUMENTS: &str = r#"{"text":"note"}"#;

fn sid(id: &str) -> SessionId {
    SessionId::new(id).unwrap()
}

struct Bed {
    fake: Fake,
    store: Store,
    cfg: Config,
    desk: Desk,
    slots: Arc<Semaphore>,
    _state: tempfile::TempDir,
}

/// A turn that ran.
struct Ran {
    end: Result<TurnEnd, TurnError>,
    events: Vec<TurnEvent>,
    session: Session,
}

/// What a test drives a running turn with: its events, and the desk.
struct Driver<'a> {
    bed: &'a Bed,
    events: mpsc::Receiver<TurnEvent>,
}

impl Driver<'_> {
    /// Waits for the turn to ask the owner; the approval's id.
    fn asked(&self) -> ApprovalId {
        loop {
            match self
                .events
                .recv_timeout(Duration::from_millis(WAIT_MS))
                .expect("the turn asked the owner in time")
            {
                TurnEvent::ApprovalRequested { approval, .. } => return approval,
                TurnEvent::Ended { end, .. } => panic!("the turn ended ({end:?}) without asking"),
                _ => {}
            }
        }
    }

    /// Answers `id` as the API does.
    fn answer(
        &self,
        id: &ApprovalId,
        answer: OwnerAnswer,
        reason: Option<&str>,
        uid: Option<u32>,
    ) -> Result<ApprovalAnswered, ApiFailure> {
        self.bed.answer(id, answer, reason, uid)
    }
}

impl Bed {
    fn new() -> Bed {
        Bed::waiting_ms(WAIT_MS)
    }

    /// A bed whose turns wait `timeout_ms` for the owner.
    fn waiting_ms(timeout_ms: u64) -> Bed {
        let state = tempfile::tempdir().unwrap();
        let mut cfg = Config {
            state_dir: state.path().to_path_buf(),
            ..Config::default()
        };
        cfg.approvals.timeout_ms = timeout_ms;
        Bed {
            fake: Fake::script(SCRIPT),
            store: Store::new(state.path()).unwrap(),
            cfg,
            desk: Desk::default(),
            slots: Arc::new(Semaphore::new(1)),
            _state: state,
        }
    }

    fn answer(
        &self,
        id: &ApprovalId,
        answer: OwnerAnswer,
        reason: Option<&str>,
        uid: Option<u32>,
    ) -> Result<ApprovalAnswered, ApiFailure> {
        let answer = ApprovalAnswer {
            answer,
            reason: reason.map(String::from),
        };
        self.fake.rt.block_on(self.desk.answer(id, answer, uid))
    }

    /// Runs a task on session `id` on a thread of its own holding the one main slot, with
    /// the desk as its owner, while `drive` does what the test does meanwhile.
    fn turn<T>(
        &self,
        port: &dyn ToolPort,
        id: &str,
        text: &str,
        stop: &Stop,
        drive: impl FnOnce(&Driver<'_>) -> T,
    ) -> (Ran, T) {
        std::thread::scope(|scope| {
            let (sender, events) = mpsc::channel();
            let worker = scope.spawn(move || {
                let blocking = self.fake.blocking();
                let permit = self.slots.clone().try_acquire_owned().unwrap();
                let owner = TurnOwner::new(
                    &self.desk,
                    self.slots.clone(),
                    permit,
                    &blocking,
                    stop.clone(),
                );
                self.run(port, &owner, id, text, stop, &mut |e| {
                    let _ = sender.send(e.clone());
                })
            });
            let driven = drive(&Driver { bed: self, events });
            (worker.join().unwrap(), driven)
        })
    }

    fn run(
        &self,
        port: &dyn ToolPort,
        owner: &dyn Owner,
        id: &str,
        text: &str,
        stop: &Stop,
        tell: &mut dyn FnMut(&TurnEvent),
    ) -> Ran {
        let blocking = self.fake.blocking();
        let client = self.fake.client();
        let registry = Registry::m2b();
        let rt = Runtime {
            cfg: &self.cfg,
            client: &client,
            blocking: &blocking,
            port,
            registry: &registry,
            system: "You are a test.",
            n_ctx: fakellama::DEFAULT_N_CTX,
            children: &crate::subagent::Subagents,
            owner,
        };
        let mut session = self.store.open_or_create(&sid(id)).unwrap();
        start_turn(&mut session, text).unwrap();
        let mut events = Vec::new();
        let end = run_turn(&rt, &mut session, stop, &mut |e| {
            events.push(e.clone());
            tell(e);
        });
        Ran {
            end,
            events,
            session,
        }
    }

    /// The content of the last message of the last request fakellama got.
    fn last_message(&self) -> String {
        let requests = self.fake.server.requests();
        crate::tests::bed::last_content(&requests.last().unwrap().body)
    }
}

/// The last turn's approval records and tool results, in words.
fn trail(session: &Session) -> Vec<String> {
    let records = session.records();
    let from = records
        .iter()
        .rposition(|r| matches!(r, LogRecord::User { .. }))
        .unwrap();
    records[from..]
        .iter()
        .filter_map(|r| match r {
            LogRecord::ApprovalRequested {
                tool,
                arguments,
                reason,
                ..
            } => Some(format!("requested {tool} {arguments} ({reason})")),
            LogRecord::ApprovalDecided {
                decision,
                uid,
                reason,
                ..
            } => Some(format!("decided {decision} {uid:?} {reason:?}")),
            LogRecord::ToolResult {
                content, outcome, ..
            } => Some(format!("result {outcome:?}: {content}")),
            _ => None,
        })
        .collect()
}

fn requested() -> String {
    format!("requested {ASKED_TOOL} {ARGUMENTS} ({REASON})")
}

fn not_approved(content: &str) -> String {
    let outcome = ToolOutcome::Denied {
        reason: DenyReason::NotApproved,
    };
    format!("result {outcome:?}: {content}")
}

#[test]
fn an_approved_call_is_sent_again_with_its_approval_and_its_result_reaches_the_model() {
    let bed = Bed::new();
    let port = AskingPort::new();
    let (ran, (id, answered)) = bed.turn(&port, "s", "save a note", &Stop::new(), |d| {
        let id = d.asked();
        let listed = bed.desk.list().approvals;
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].session.as_str(), listed[0].tool.as_str()),
            ("s", ASKED_TOOL)
        );
        let answered = d
            .answer(&id, OwnerAnswer::Approve, None, Some(1000))
            .unwrap();
        // The answer returns once the decision is durable.
        let on_disk = bed.store.read(&sid("s")).unwrap();
        assert!(on_disk.iter().any(|r| matches!(
            r,
            LogRecord::ApprovalDecided {
                decision: ApprovalDecision::Approved,
                uid: Some(1000),
                ..
            }
        )));
        (id, answered)
    });
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    assert_eq!(answered.decision, ApprovalDecision::Approved);
    assert_eq!(answered.session, sid("s"));
    let requests = port.requests();
    assert_eq!(requests.len(), 2, "asked once, sent again once");
    assert_eq!(requests[0].approval, None);
    assert_eq!(
        requests[1].approval,
        Some(ApprovalUse {
            id: id.clone(),
            for_turn: false
        })
    );
    assert_eq!(
        (&requests[1].arguments, requests[1].call),
        (&requests[0].arguments, requests[0].call)
    );
    let result = asking::ran(ASKED_TOOL, ARGUMENTS);
    assert_eq!(
        trail(&ran.session),
        [
            requested(),
            "decided approved Some(1000) None".into(),
            format!("result Ok: {result}"),
        ]
    );
    assert!(bed.last_message().contains(&result), "the model saw it");
    let kinds: Vec<&str> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ApprovalRequested { .. } => Some("requested"),
            TurnEvent::ApprovalDecided { .. } => Some("decided"),
            TurnEvent::ToolResult { .. } => Some("result"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["requested", "decided", "result"]);
    // Answered: off the list, and a second answer finds nothing.
    assert!(bed.desk.list().approvals.is_empty());
    assert!(matches!(
        bed.answer(&id, OwnerAnswer::Deny, None, None),
        Err(ApiFailure::NotFound(_))
    ));
    // An attended session's request is no notification.
    assert!(heartbeat::list(&bed.cfg).unwrap().is_empty());
}

#[test]
fn a_denied_call_never_runs_and_the_model_reads_the_owners_reason() {
    let bed = Bed::new();
    let port = AskingPort::new();
    let (ran, _) = bed.turn(&port, "s", "save a note", &Stop::new(), |d| {
        let id = d.asked();
        d.answer(&id, OwnerAnswer::Deny, Some(" not today "), Some(1000))
            .unwrap()
    });
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let told = "the owner denied this call: not today";
    assert_eq!(
        trail(&ran.session),
        [
            requested(),
            "decided denied Some(1000) Some(\"not today\")".into(),
            not_approved(told),
        ]
    );
    assert!(bed.last_message().contains(told));
    drop(ran.session);
    // Without a reason, the model is told there was none.
    let (ran, _) = bed.turn(&port, "s", "save again", &Stop::new(), |d| {
        let id = d.asked();
        d.answer(&id, OwnerAnswer::Deny, None, None).unwrap()
    });
    let told = "the owner denied this call: no reason given";
    assert_eq!(trail(&ran.session)[2], not_approved(told));
    assert_eq!(port.requests().len(), 2, "never sent with an approval");
    assert!(port.requests().iter().all(|r| r.approval.is_none()));
}

#[test]
fn silence_means_no_after_the_wait_and_the_turn_goes_on() {
    let bed = Bed::waiting_ms(40);
    let port = AskingPort::new();
    let (ran, ()) = bed.turn(&port, "s", "save a note", &Stop::new(), |_| ());
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let told = "no answer from the owner in 40ms";
    assert_eq!(
        trail(&ran.session),
        [
            requested(),
            format!("decided timed_out None Some({told:?})"),
            not_approved(told),
        ]
    );
    assert!(bed.last_message().contains(told));
    assert!(bed.desk.list().approvals.is_empty());
    assert_eq!(port.requests().len(), 1);
    // The wait is never longer than brokerd holds the approval.
    let bed = Bed::new();
    let port = AskingPort::expiring_in(30);
    let (ran, ()) = bed.turn(&port, "s", "save a note", &Stop::new(), |_| ());
    assert!(
        ran.session
            .records()
            .iter()
            .any(|r| matches!(r, LogRecord::ApprovalRequested { timeout_ms: 30, .. }))
    );
    assert_eq!(
        trail(&ran.session)[2],
        not_approved("no answer from the owner in 30ms")
    );
}

#[test]
fn approved_for_the_turn_a_second_identical_call_is_not_asked_but_one_in_the_next_turn_is() {
    let bed = Bed::new();
    let port = AskingPort::new();
    let (ran, ()) = bed.turn(&port, "s", "call it twice", &Stop::new(), |d| {
        let id = d.asked();
        d.answer(&id, OwnerAnswer::ApproveForTurn, None, Some(7))
            .unwrap();
    });
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let result = format!("result Ok: {}", asking::ran(ASKED_TOOL, ARGUMENTS));
    assert_eq!(
        trail(&ran.session),
        [
            requested(),
            "decided approved_for_turn Some(7) None".into(),
            result.clone(),
            result.clone(),
        ]
    );
    let approvals: Vec<Option<bool>> = port
        .requests()
        .iter()
        .map(|r| r.approval.as_ref().map(|a| a.for_turn))
        .collect();
    assert_eq!(approvals, [None, Some(true), None]);
    drop(ran.session);
    // The next turn asks again.
    let (ran, ()) = bed.turn(&port, "s", "save a note", &Stop::new(), |d| {
        let id = d.asked();
        d.answer(&id, OwnerAnswer::Approve, None, Some(7)).unwrap();
    });
    assert_eq!(
        trail(&ran.session),
        [requested(), "decided approved Some(7) None".into(), result]
    );
    assert_eq!(port.requests().len(), 5);
}

#[test]
fn a_turn_stopped_while_it_waits_records_the_approval_void_and_never_sends_the_call() {
    for (shutdown, end, why) in [
        (false, TurnEnd::Cancelled, "the turn was cancelled"),
        (true, TurnEnd::Interrupted, "loopd is shutting down"),
    ] {
        let bed = Bed::new();
        let port = AskingPort::new();
        let stop = Stop::new();
        let (ran, id) = bed.turn(&port, "s", "save a note", &stop, |d| {
            let id = d.asked();
            if shutdown {
                stop.shut_down();
            } else {
                stop.cancel();
            }
            id
        });
        assert_eq!(ran.end.unwrap(), end);
        let trail = trail(&ran.session);
        assert_eq!(trail[1], format!("decided void None Some({why:?})"));
        assert!(trail[2].contains(why), "{trail:?}");
        assert_eq!(port.requests().len(), 1, "the call is never sent again");
        assert!(bed.desk.list().approvals.is_empty());
        assert!(matches!(
            bed.answer(&id, OwnerAnswer::Approve, None, None),
            Err(ApiFailure::NotFound(_))
        ));
    }
}

#[test]
fn an_approval_brokerd_refuses_after_the_owner_approved_is_recorded_void() {
    let bed = Bed::new();
    let port = AskingPort::forgetting();
    let (ran, _) = bed.turn(&port, "s", "save a note", &Stop::new(), |d| {
        let id = d.asked();
        d.answer(&id, OwnerAnswer::Approve, None, Some(1000))
            .unwrap()
    });
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let trail = trail(&ran.session);
    assert_eq!(
        trail[..3],
        [
            requested(),
            "decided approved Some(1000) None".to_string(),
            format!("decided void None Some({FORGOTTEN:?})"),
        ]
    );
    let refused = ToolOutcome::Denied {
        reason: DenyReason::ApprovalRefused,
    };
    assert!(
        trail[3].starts_with(&format!("result {refused:?}")) && trail[3].contains(FORGOTTEN),
        "{trail:?}"
    );
    assert!(bed.last_message().contains(FORGOTTEN), "the model sees it");
}

#[test]
fn a_heartbeat_turns_request_and_its_subagents_are_written_as_notifications() {
    let bed = Bed::new();
    let port = AskingPort::new();
    // A child of a heartbeat turn: its calls count against that turn.
    let mut child = bed.store.create(&sid("sub-heartbeat-1")).unwrap();
    child
        .append(LogRecord::Inherited {
            time: Timestamp::now(),
            parent: sid("heartbeat"),
            class: DataClass::Public,
            untrusted: false,
            root_session: sid("heartbeat"),
            root_turn: 1,
        })
        .unwrap();
    drop(child);
    for (n, session) in ["heartbeat", "sub-heartbeat-1"].into_iter().enumerate() {
        let (ran, ()) = bed.turn(&port, session, "save a note", &Stop::new(), |d| {
            let id = d.asked();
            // Written before the owner could answer: nobody watches this turn.
            let notes = heartbeat::list(&bed.cfg).unwrap();
            assert_eq!(notes.len(), n + 1);
            let note = notes.last().unwrap();
            assert_eq!(note.session, sid(session));
            for words in [id.as_str(), ASKED_TOOL, REASON, "boxctl approve"] {
                assert!(note.text.contains(words), "{words}: {}", note.text);
            }
            d.answer(&id, OwnerAnswer::Deny, None, None).unwrap();
        });
        assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    }
}

#[test]
fn without_an_engine_nobody_can_answer_and_the_call_is_void_at_once() {
    let bed = Bed::new();
    let port = AskingPort::new();
    let ran = bed.run(
        &port,
        &NoOwner,
        "s",
        "save a note",
        &Stop::new(),
        &mut |_| {},
    );
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let trail = trail(&ran.session);
    assert_eq!(trail[1], format!("decided void None Some({NO_OWNER:?})"));
    assert!(trail[2].contains(NO_OWNER));
    assert_eq!(port.requests().len(), 1);
}
