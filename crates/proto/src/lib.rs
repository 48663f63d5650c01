//! The wire types between boxmaker's processes.
//!
//! One crate is the contract: loopd, brokerd and boxctl all build their requests and parse
//! their answers with these types, so a change of protocol is a change here, seen by all.
//! Every type we own refuses unknown fields.

pub mod api;
mod tool;
mod undo;

pub use tool::{
    ApprovalAsk, ApprovalUse, CALL_TOOL, Catalogue, CatalogueTool, FIND_TOOL, LOOPD_TOOLS,
    READ_OUTPUT, SUBAGENT, ToolRequest, ToolResponse, ToolSchema, TurnRef,
};
pub use undo::{
    DiffAnswer, FileDiff, ForkAnswer, ForkRequest, PutBack, UndoAnswer, UndoRequest, UndoTurns,
};

/// What brokerd's `GET /v1/health` answers: that it is up, and whether its `exec` tool can run
/// (issue 15).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerHealth {
    /// Always `ok` when brokerd answers.
    pub status: String,
    /// The `exec` tool's walls as a status line says them, after `exec: `: e.g.
    /// `bubblewrap + Landlock v4`, or `unavailable: user namespaces are disabled` (then `exec`
    /// is in no catalogue and every call of it is denied). Absent from a brokerd before issue 15.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<String>,
    /// What brokerd keeps of writes for undo, as a status line: e.g. `4 write(s) of 2
    /// session(s) kept, 12 KiB of 64 MiB` (and how many the bounds dropped), or `off`. Absent
    /// from a brokerd before checkpoints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<String>,
}

/// The protocol version; it is the `/v1` in every path.
pub const PROTOCOL_VERSION: u32 = 1;
