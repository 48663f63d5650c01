//! Tool calls between loopd and brokerd, and the schemas tools are described by.

use bxcore::{CallId, DataClass, DenyReason, Labels, SessionId};
use serde::{Deserialize, Serialize};

/// A tool as the model sees it: name, description and a JSON Schema of its arguments.
///
/// It is written into every epoch's baseline file, so it is our format: unknown fields are
/// refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSchema {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// A JSON Schema object for its arguments.
    pub parameters: serde_json::Value,
}

/// One tool call, as loopd asks brokerd to run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRequest {
    /// The session that makes the call.
    pub session: SessionId,
    /// The turn of that session it is made in (per-turn rate limits count by it).
    pub turn: u64,
    /// The call's number in that session.
    pub call: CallId,
    /// The tool to run (never `call_tool`: loopd unwraps it).
    pub tool: String,
    /// The arguments as JSON text.
    pub arguments: String,
    /// The label of the caller's context: what the call could carry out.
    pub context: Labels,
}

/// What came of a [`ToolRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolResponse {
    /// The tool ran.
    Result {
        /// Its output.
        content: String,
        /// The class its output gets.
        class: DataClass,
        /// Whether its output came from outside.
        untrusted: bool,
        /// Whether the output was cut to the cap.
        truncated: bool,
    },
    /// The tool could not run, or failed.
    Failed {
        /// Why.
        message: String,
    },
    /// The broker refused the call.
    Denied {
        /// Why.
        reason: DenyReason,
        /// What exactly, when there is more to say.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
}

/// The tools brokerd offers one session: only those some grant lets it call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalogue {
    /// The session it was made for.
    pub session: SessionId,
    /// The tools, in a stable order (by name).
    pub tools: Vec<ToolSchema>,
}
