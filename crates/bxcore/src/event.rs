//! What a running turn reports as it goes: streamed to `boxctl` as server-sent events.

use crate::{
    ApprovalDecision, ApprovalId, CallId, DataClass, Labels, SessionId, ToolCall, ToolOutcome,
    TurnEnd, Usage,
};
use serde::{Deserialize, Serialize};

/// The model server's timings of one call (llama-server's `timings`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelTimings {
    /// Prompt tokens reused from the slot's cache.
    pub cache_n: u64,
    /// Prompt tokens evaluated.
    pub prompt_n: u64,
    /// Time to evaluate them, in milliseconds.
    pub prompt_ms: f64,
    /// Tokens generated.
    pub predicted_n: u64,
    /// Time to generate them, in milliseconds.
    pub predicted_ms: f64,
}

/// One step of a turn, as it happens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum TurnEvent {
    /// The turn began.
    Started {
        /// Its session.
        session: SessionId,
        /// Its number in the session.
        turn: u64,
    },
    /// A piece of the model's visible answer.
    Content {
        /// The new text.
        text: String,
    },
    /// A piece of the model's reasoning.
    Reasoning {
        /// The new text.
        text: String,
    },
    /// A model call failed in a way that is retried.
    Retry {
        /// Which attempt failed, from 1.
        attempt: u32,
        /// How long until the next one.
        delay_ms: u64,
        /// What went wrong.
        error: String,
    },
    /// One model call finished.
    ModelDone {
        /// Its token counts.
        usage: Usage,
        /// How long the call took, from sending the request to the end of the answer, in
        /// microseconds (retries included).
        model_us: u64,
        /// The server's own timings, when it sent them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timings: Option<ModelTimings>,
    },
    /// The model asked for a tool.
    ToolCall {
        /// The call's number in the session.
        call: CallId,
        /// What it asked for.
        tool_call: ToolCall,
    },
    /// A tool call came back.
    ToolResult {
        /// The call's number in the session.
        call: CallId,
        /// How it ended.
        outcome: ToolOutcome,
        /// The result's class.
        class: DataClass,
        /// Whether the result is untrusted.
        untrusted: bool,
        /// Whether it was cut to the cap.
        truncated: bool,
        /// Its length in bytes, as the model saw it.
        bytes: u64,
    },
    /// brokerd asks the owner about a call, and the turn waits (sent after the session log
    /// holds the request). Answer it with `POST /v1/approvals/{approval}`.
    ApprovalRequested {
        /// The call's number in the session.
        call: CallId,
        /// brokerd's id for it.
        approval: ApprovalId,
        /// The tool that would run.
        tool: String,
        /// Its arguments (JSON text): what would run.
        arguments: String,
        /// Why brokerd asks.
        reason: String,
        /// How long the turn waits, in milliseconds.
        timeout_ms: u64,
    },
    /// The wait for an approval ended (sent after the session log holds the decision).
    ApprovalDecided {
        /// The call's number in the session.
        call: CallId,
        /// brokerd's id for it.
        approval: ApprovalId,
        /// What became of it.
        decision: ApprovalDecision,
    },
    /// The turn ended; the last event of a turn.
    Ended {
        /// The turn.
        turn: u64,
        /// How it ended.
        end: TurnEnd,
        /// The session's context label when it ended: the label of anything made from the
        /// turn (its answer, a notification).
        #[serde(default)]
        context: Labels,
    },
    /// An event of a subagent's turn, run for one of this turn's tool calls.
    Subagent {
        /// The child session.
        session: SessionId,
        /// What happened there (itself `Subagent` for a grandchild).
        event: Box<TurnEvent>,
    },
}
