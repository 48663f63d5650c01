//! A stand-in for brokerd's side of approvals (issue 16, `docs/approvals.md`), for the tests of
//! turns that wait for the owner: every call of [`ASKED_TOOL`] asks the owner first
//! (`ToolResponse::Ask` with a fresh id); an approval it minted is accepted once, and only for
//! the session, tool and arguments it was minted for; an approval used `for_turn` lets later
//! calls of the same tool in the same turn of the same session run without asking, as
//! brokerd's policy does. A call with [`HELD_ARGUMENTS`] runs without asking until the test
//! lets it end ([`AskingPort::release_held`]), so a turn can hold its main slot for as long as
//! a test needs. Any other tool just runs, answering [`ran`], or what the test gave it to
//! answer ([`AskingPort::answering`]).
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use crate::tools::ToolPort;
use bxcore::{ApprovalId, DataClass, DenyReason, SessionId};
use proto::{ApprovalAsk, ToolRequest, ToolResponse};
use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The tool whose every call asks the owner.
pub const ASKED_TOOL: &str = "echo";
/// Why the port asks.
pub const REASON: &str = "echo asks the owner first (approve = always)";
/// The arguments of a call that runs, without asking, until the test lets it end.
pub const HELD_ARGUMENTS: &str = r#"{"text":"hold"}"#;
/// The longest a call with [`HELD_ARGUMENTS`] waits to be let go, in milliseconds (a test that
/// forgets to let it go fails rather than hangs).
pub const HELD_MAX_MS: u64 = 60_000;
/// What the port says when it refuses an approval it does not hold.
pub const FORGOTTEN: &str = "approval unknown: brokerd restarted since it was minted";

/// What a call that ran answers.
pub fn ran(tool: &str, arguments: &str) -> String {
    format!("ran {tool} {arguments}")
}

#[derive(Default)]
struct State {
    /// Minted and not used: id → (session, tool, arguments).
    minted: HashMap<ApprovalId, (SessionId, String, String)>,
    /// (session, turn, tool) approved for the rest of the turn.
    for_turn: HashSet<(SessionId, u64, String)>,
    /// Every request, in order.
    requests: Vec<ToolRequest>,
    minted_count: u64,
}

/// The stand-in port.
pub struct AskingPort {
    state: Mutex<State>,
    /// How long an approval holds (`ApprovalAsk::expires_in_ms`).
    expires_in_ms: u64,
    /// Refuses every approval, as a brokerd that restarted after it minted them.
    forgets: bool,
    /// Whether calls with [`HELD_ARGUMENTS`] may end.
    released: Mutex<bool>,
    let_go: Condvar,
    /// What calls of a tool answer, by tool, in place of [`ran`].
    answers: HashMap<String, String>,
}

impl AskingPort {
    /// A port whose approvals hold 15 minutes.
    pub fn new() -> AskingPort {
        AskingPort {
            state: Mutex::default(),
            expires_in_ms: 900_000,
            forgets: false,
            released: Mutex::new(false),
            let_go: Condvar::new(),
            answers: HashMap::new(),
        }
    }

    /// The port, with every call of `tool` that runs answering `content`.
    pub fn answering(mut self, tool: &str, content: &str) -> AskingPort {
        self.answers.insert(tool.to_string(), content.to_string());
        self
    }

    /// What a call of `request` that ran answers.
    fn ran(&self, request: &ToolRequest) -> ToolResponse {
        match self.answers.get(&request.tool) {
            Some(content) => result(content.clone()),
            None => result(ran(&request.tool, &request.arguments)),
        }
    }

    /// A port whose approvals hold `ms` milliseconds.
    pub fn expiring_in(ms: u64) -> AskingPort {
        AskingPort {
            expires_in_ms: ms,
            ..AskingPort::new()
        }
    }

    /// A port that refuses every approval it is sent.
    pub fn forgetting() -> AskingPort {
        AskingPort {
            forgets: true,
            ..AskingPort::new()
        }
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<ToolRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// Lets every call with [`HELD_ARGUMENTS`], running or to come, end.
    pub fn release_held(&self) {
        *self.released.lock().unwrap() = true;
        self.let_go.notify_all();
    }

    /// Waits until the test lets calls with [`HELD_ARGUMENTS`] end (at most [`HELD_MAX_MS`]).
    fn hold(&self) {
        let released = self.released.lock().unwrap();
        let (released, _) = self
            .let_go
            .wait_timeout_while(released, Duration::from_millis(HELD_MAX_MS), |r| !*r)
            .unwrap();
        assert!(*released, "a call with {HELD_ARGUMENTS} was never let go");
    }
}

fn result(content: String) -> ToolResponse {
    ToolResponse::Result {
        content,
        class: DataClass::Public,
        untrusted: false,
        truncated: false,
    }
}

fn refused(detail: &str) -> ToolResponse {
    ToolResponse::Denied {
        reason: DenyReason::ApprovalRefused,
        detail: Some(detail.to_string()),
        labels: None,
    }
}

impl ToolPort for AskingPort {
    fn call(&self, request: &ToolRequest) -> ToolResponse {
        if request.arguments == HELD_ARGUMENTS {
            self.state.lock().unwrap().requests.push(request.clone());
            self.hold();
            return result(ran(&request.tool, &request.arguments));
        }
        let mut state = self.state.lock().unwrap();
        state.requests.push(request.clone());
        let key = (request.session.clone(), request.turn, request.tool.clone());
        if let Some(approval) = &request.approval {
            if self.forgets {
                return refused(FORGOTTEN);
            }
            let Some(bound) = state.minted.remove(&approval.id) else {
                return refused("approval unknown or used");
            };
            let call = (
                request.session.clone(),
                request.tool.clone(),
                request.arguments.clone(),
            );
            if bound != call {
                return refused("approval for another call");
            }
            if approval.for_turn {
                state.for_turn.insert(key);
            }
            return self.ran(request);
        }
        if request.tool != ASKED_TOOL || state.for_turn.contains(&key) {
            return self.ran(request);
        }
        state.minted_count += 1;
        let id =
            ApprovalId::new(&format!("ap-{}-{}", request.session, state.minted_count)).unwrap();
        state.minted.insert(
            id.clone(),
            (
                request.session.clone(),
                request.tool.clone(),
                request.arguments.clone(),
            ),
        );
        ToolResponse::Ask {
            approval: ApprovalAsk {
                id,
                tool: request.tool.clone(),
                arguments: request.arguments.clone(),
                session: request.session.clone(),
                context: request.context,
                reason: REASON.to_string(),
                expires_in_ms: self.expires_in_ms,
            },
        }
    }
}
