//! Tool calls between loopd and brokerd, and the schemas tools are described by.

use bxcore::{ApprovalId, CallId, DataClass, DenyReason, Labels, SessionId};
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
    /// The user's turn this call counts against for per-turn limits, when it is not this
    /// session's own: a subagent's calls count against the turn of the top-level session that
    /// started it, so children cannot multiply a `max_calls_per_turn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts_for: Option<TurnRef>,
    /// The owner's approval of this exact call, when brokerd asked for one
    /// ([`ToolResponse::Ask`]) and the owner approved: brokerd accepts it once, only for the
    /// session, tool and argument digest it minted it for, and only before it expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalUse>,
}

/// An approval loopd sends with a call the owner approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalUse {
    /// The id brokerd minted in its [`ToolResponse::Ask`].
    pub id: ApprovalId,
    /// The owner approved the tool for the rest of this turn: brokerd then allows later calls
    /// of the same tool in the same turn of the same session without asking.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub for_turn: bool,
}

/// brokerd's question to the owner about one call, the answer to a call whose grant says
/// `approve` (or `when_untrusted = "ask"` in an untrusted context): nothing ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalAsk {
    /// The approval's id, minted by brokerd and bound to this call.
    pub id: ApprovalId,
    /// The tool that would run.
    pub tool: String,
    /// The arguments exactly as received (the owner must see what would run; brokerd's audit
    /// log keeps only their digest).
    pub arguments: String,
    /// The calling session.
    pub session: SessionId,
    /// The caller's context label.
    pub context: Labels,
    /// Why brokerd asks, in words for the owner ("write_file after untrusted text entered
    /// the session").
    pub reason: String,
    /// How long brokerd accepts an approval of it, from now, in milliseconds.
    pub expires_in_ms: u64,
}

/// One turn of one session.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRef {
    /// The session.
    pub session: SessionId,
    /// The turn's number in it.
    pub turn: u64,
}

impl ToolRequest {
    /// The turn whose per-turn limits this call counts against: `counts_for`, or this
    /// session's own turn.
    pub fn counted_turn(&self) -> TurnRef {
        self.counts_for.clone().unwrap_or_else(|| TurnRef {
            session: self.session.clone(),
            turn: self.turn,
        })
    }
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
        /// The label of the message when a tool produced or shaped it (the grant's result
        /// label: a tool's error can quote what it read, and even its failing says something);
        /// `None` when the call never reached a tool and the text is the broker's own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        labels: Option<Labels>,
    },
    /// The grant asks the owner first: nothing ran. Send the call again with
    /// [`ToolRequest::approval`] once the owner approved it.
    Ask {
        /// The question.
        approval: ApprovalAsk,
    },
    /// The broker refused the call.
    Denied {
        /// Why.
        reason: DenyReason,
        /// What exactly, when there is more to say.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
        /// As for `Failed`: set when the tool itself refused (e.g. a redirect to a host outside
        /// the grant), `None` for the broker's policy.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        labels: Option<Labels>,
    },
}

impl ToolResponse {
    /// A failure in the broker's own words, before any tool ran.
    pub fn failed(message: impl Into<String>) -> ToolResponse {
        ToolResponse::Failed {
            message: message.into(),
            labels: None,
        }
    }

    /// A refusal by the broker's policy, before any tool ran.
    pub fn denied(reason: DenyReason, detail: Option<String>) -> ToolResponse {
        ToolResponse::Denied {
            reason,
            detail,
            labels: None,
        }
    }

    /// The label of what this answer tells the model: the result's, the tool's for a failure
    /// or refusal a tool made, public and trusted for the broker's own words (an `Ask` is
    /// never shown to the model as it is).
    pub fn labels(&self) -> Labels {
        match self {
            ToolResponse::Result {
                class, untrusted, ..
            } => Labels::new(*class, *untrusted),
            ToolResponse::Failed { labels, .. } | ToolResponse::Denied { labels, .. } => {
                labels.unwrap_or(Labels::PUBLIC)
            }
            ToolResponse::Ask { .. } => Labels::PUBLIC,
        }
    }
}

/// The tools brokerd offers one session: only those some grant lets it call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalogue {
    /// The session it was made for.
    pub session: SessionId,
    /// The tools, in a stable order (by name).
    pub tools: Vec<CatalogueTool>,
}

/// One tool of a [`Catalogue`]: its schema and the label of the schema's text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CatalogueTool {
    /// How the model sees it.
    pub schema: ToolSchema,
    /// The label of its name and description: public and trusted for brokerd's own tools;
    /// an MCP server's label (untrusted by default) for the tools that server describes, since
    /// its author wrote that text and the model reads it.
    pub labels: Labels,
}

/// The tool that searches the catalogue of the tools brokerd offers (answered by loopd).
pub const FIND_TOOL: &str = "find_tool";
/// The tool that calls a catalogue tool by name (answered by loopd, which sends the target).
pub const CALL_TOOL: &str = "call_tool";
/// The tool that runs a task in a child session (answered by loopd).
pub const SUBAGENT: &str = "subagent";
/// The tool that reads pages of a stored output (answered by loopd).
pub const READ_OUTPUT: &str = "read_output";

/// Every tool loopd answers itself, the one list both daemons use: brokerd never offers or
/// grants one of these names (a grant applies to the target tool of a `call_tool`), and loopd
/// never sends one to brokerd.
pub const LOOPD_TOOLS: [&str; 4] = [FIND_TOOL, CALL_TOOL, SUBAGENT, READ_OUTPUT];
