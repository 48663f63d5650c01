//! Tools as loopd sees them (seed M2b-03): the port every tool call goes through, the registry
//! of what exists (`registry`), the one routing step that decides what becomes of a call and
//! unwraps `call_tool` once (`dispatch`), the result cap, and the fake tools that stand in for
//! brokerd in tests and when no broker is configured (`fake`).
//!
//! The tools layer sits above `text`, `session`, `llama` and `config` and below everything
//! that runs calls: it knows the names of the tools loopd answers itself (`proto::LOOPD_TOOLS`)
//! but not how loopd runs them (a subagent runs in `subagent`, above `turn`).
//!
//! The tools array the model gets is fixed for an epoch and holds only the core tools plus
//! `find_tool` and `call_tool` (spec section 4): every other tool is found with `find_tool` and
//! called through `call_tool`, which loopd unwraps so that brokerd applies its grants to the
//! target tool, never to `call_tool`.

pub use crate::text::cap_result;
use proto::{ToolRequest, ToolResponse};
use tokio_util::sync::CancellationToken;

mod dispatch;
mod fake;
mod registry;
#[cfg(test)]
pub(crate) mod tests;

pub use dispatch::{
    Dispatch, dispatch, duplicate_key_message, find_tool_labels, parse_subagent_task,
    subagent_dispatch, target_tool,
};
pub use fake::{FAKE_TOOLS_NOTE, FakeTools};
pub use registry::{Entry, Registry, clock_schema, echo_schema};

/// The seeds' refusal text, re-exported because dispatch code builds its local answers with it.
pub use bxcore::denial_message;

/// The name of the tool that searches the registry. loopd answers it itself.
pub const FIND_TOOL: &str = proto::FIND_TOOL;
/// The name of the tool that calls a tool `find_tool` returned. loopd unwraps it.
pub const CALL_TOOL: &str = proto::CALL_TOOL;
/// The name of the clock, loopd's own core tool.
pub const CLOCK: &str = "clock";
/// The name of the echo tool, a non-core tool that only exists to exercise `call_tool`.
pub const ECHO: &str = "echo";

/// Where loopd sends the tool calls it does not answer itself: brokerd in production,
/// [`FakeTools`] in tests and when no broker is configured.
pub trait ToolPort: Send + Sync {
    /// Runs one call and says what came of it. Refusals and failures are answers, not errors:
    /// the model gets them as the tool result.
    fn call(&self, request: &ToolRequest) -> ToolResponse;

    /// [`ToolPort::call`], given up once `stop` is cancelled (the turn was stopped: cancelled,
    /// shutting down, or at a budget such as `max_turn_ms`), so that a stopped turn does not
    /// wait for a slow tool. The default runs the call to its end: a port that answers at
    /// once needs no more; brokerd's gives up.
    fn call_until(&self, request: &ToolRequest, stop: &CancellationToken) -> ToolResponse {
        let _ = stop;
        self.call(request)
    }

    /// The tools this port offers `session`, when it decides per session (brokerd's
    /// catalogue); `None`: it offers the same tools to every session.
    fn catalogue(&self, session: &bxcore::SessionId) -> Option<proto::Catalogue> {
        let _ = session;
        None
    }

    /// Undoes (or, dry, lists) what the session's turns from `request.from_turn` on wrote
    /// (brokerd's checkpoints, `docs/undo.md`). A port that records no writes says so.
    fn undo(&self, request: &proto::UndoRequest) -> Result<proto::UndoAnswer, PortRefusal> {
        let _ = request;
        Err(PortRefusal::NotRecorded)
    }

    /// What the session's writes changed (turn `turn`'s only, when given), as diffs.
    fn diff(
        &self,
        session: &bxcore::SessionId,
        turn: Option<u64>,
    ) -> Result<proto::DiffAnswer, PortRefusal> {
        let _ = (session, turn);
        Err(PortRefusal::NotRecorded)
    }
}

/// Why a port did not undo or show writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortRefusal {
    /// It records no writes (no brokerd, or its checkpoints are off).
    #[error("no writes are recorded here: undo and diff need brokerd with [checkpoints] on")]
    NotRecorded,
    /// What is on disk is not what the undo expects: a file changed since, or its earlier
    /// content no longer kept. brokerd's words.
    #[error("{0}")]
    Conflict(String),
    /// brokerd could not be asked, or failed.
    #[error("brokerd: {0}")]
    Unavailable(String),
}
