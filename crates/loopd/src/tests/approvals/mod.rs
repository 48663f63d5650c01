#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Turns that wait for the owner (issue 16): a call brokerd asks about (the stand-in
//! `AskingPort`) is recorded, listed on the engine's desk and waited for; approved, it is sent
//! again with its approval (`answered`); denied, timed out, cancelled or refused by brokerd,
//! it does not run and the model reads why (`unanswered`). Each turn runs on its own thread
//! with the desk's `TurnOwner`, as the engine runs it; the test answers through the desk, as
//! the API does.

mod answered;
mod unanswered;

use crate::api::ApiFailure;
use crate::config::Config;
use crate::engine::approvals::{Desk, TurnOwner};
use crate::llama::tests::support::Fake;
use crate::session::{Session, Store};
use crate::tools::tests::asking::{ASKED_TOOL, REASON};
use crate::tools::{Registry, ToolPort};
use crate::turn::{Owner, Runtime, Stop, TurnError, run_turn, start_turn};
use bxcore::{ApprovalId, DenyReason, LogRecord, SessionId, ToolOutcome, TurnEnd, TurnEvent};
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
        self.turn_as(false, port, id, text, stop, drive)
    }

    /// [`Bed::turn`], the turn `unattended` (a schedule's run) or not.
    fn turn_as<T>(
        &self,
        unattended: bool,
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
                    unattended,
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
            models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
            blocking: &blocking,
            port,
            registry: &registry,
            system: "You are a test.",
            n_ctx: fakellama::DEFAULT_N_CTX,
            children: &crate::subagent::Subagents,
            owner,
            meter: &crate::turn::NoMeter,
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
