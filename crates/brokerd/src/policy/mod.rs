//! Whether a tool call may run: [`decide`] checks a request against the grants, the caller's
//! context label and the per-turn counts, in a fixed order, and says why when it may not;
//! [`admit`] is the approval step that comes after the tool's own check.
//!
//! The order (the first failing check is the reason; `docs/approvals.md` has the whole of it):
//!
//! 1. `UnknownTool`: no tool of that name in the tool set (`call_tool`, `find_tool` and
//!    `subagent` never are: loopd answers them, and grants apply to the target tool).
//! 2. `NoGrant`: no grant names the tool with a session glob that matches the session.
//! 3. For each matching grant, in config order, until one passes all three:
//!    `Egress` (the context's class is above the grant's `max_context_class`),
//!    `UntrustedContext` (the context is untrusted and the grant says `when_untrusted = deny`),
//!    `RateLimit` (the grant's `max_calls_per_turn` is used up for this turn and tool; a
//!    subagent's calls count against the turn of the top-level session that started it,
//!    `ToolRequest::counts_for`, so children cannot multiply a limit).
//!    When none passes, the reason is the first matching grant's.
//! 4. `InvalidArguments`: the arguments are not a JSON object (blank text counts as `{}`), or
//!    one of their objects holds a key twice.
//! 5. The tool's own check (paths, hosts, programs: `Tool::check`, run by the broker).
//! 6. The approval step ([`admit`]): an approval the request carries is checked
//!    (`ApprovalRefused`), a grant that asks the owner answers with an approval to decide
//!    (`ToolResponse::Ask`), unless a turn allowance covers the call; too many outstanding is
//!    `NotApproved`.
//!
//! [`decide`] counts nothing: [`admit`] counts a call for the rate limit when it runs, never
//! when it is refused or asked about.

mod admit;
mod approvals;
mod counters;
mod grants;

pub use admit::{Admission, admit, ask_reason};
pub use approvals::{
    APPROVAL_ID_PREFIX, APPROVAL_ID_RANDOM_CHARS, ApprovalTable, MAX_REMEMBERED_USED,
    MAX_TURN_ALLOWANCES, MintError, Refusal,
};
pub use counters::{CallCounters, MAX_TRACKED_SESSIONS};
pub use grants::{GlobError, Grants};

use crate::config::{Grant, WhenUntrusted};
use bxcore::DenyReason;
use bxcore::json::{JsonError, parse_no_duplicates, shown_key};
use proto::ToolRequest;
use serde_json::{Map, Value};
use std::sync::Arc;

/// What [`decide`] says.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// The call may run under `grant`, with these arguments.
    Allow {
        /// The grant that allows it: its paths, hosts and result label apply.
        grant: Arc<Grant>,
        /// The parsed arguments (a JSON object).
        arguments: Value,
    },
    /// The call may not run.
    Deny {
        /// Why.
        reason: DenyReason,
        /// What exactly. Never quotes the arguments.
        detail: String,
    },
}

impl Decision {
    fn deny(reason: DenyReason, detail: impl Into<String>) -> Decision {
        Decision::Deny {
            reason,
            detail: detail.into(),
        }
    }
}

/// Decides `request` under `grants`, up to and including its arguments; `tool_known` says
/// whether a tool of its name exists. Counts nothing: an allowed call still goes through the
/// tool's check and [`admit`], which counts it when it runs.
pub fn decide(
    request: &ToolRequest,
    grants: &Grants,
    tool_known: bool,
    counters: &CallCounters,
) -> Decision {
    let tool = request.tool.as_str();
    if !tool_known {
        return Decision::deny(DenyReason::UnknownTool, unknown_tool_detail(tool));
    }
    let mut first_refusal = None;
    let mut usable = None;
    for grant in grants.matching(tool, &request.session) {
        match check_grant(grant, request, counters) {
            Ok(()) => {
                usable = Some(grant);
                break;
            }
            Err(refusal) => {
                first_refusal.get_or_insert(refusal);
            }
        }
    }
    let Some(grant) = usable else {
        return match first_refusal {
            Some((reason, detail)) => Decision::deny(reason, detail),
            None => Decision::deny(
                DenyReason::NoGrant,
                format!(
                    "no grant lets session {:?} call {tool:?}",
                    request.session.as_str()
                ),
            ),
        };
    };
    let arguments = match parse_arguments(&request.arguments) {
        Ok(arguments) => arguments,
        Err(why) => return Decision::deny(DenyReason::InvalidArguments, why),
    };
    Decision::Allow {
        grant: Arc::clone(grant),
        arguments,
    }
}

fn unknown_tool_detail(tool: &str) -> String {
    if crate::toolset::LOOPD_TOOLS.contains(&tool) {
        format!("{tool:?} is answered by loopd, never by brokerd; ask for the target tool")
    } else {
        format!("brokerd offers no tool named {tool:?}")
    }
}

/// Egress, untrusted context and rate limit for one grant.
fn check_grant(
    grant: &Grant,
    request: &ToolRequest,
    counters: &CallCounters,
) -> Result<(), (DenyReason, String)> {
    let tool = request.tool.as_str();
    let context = request.context;
    if context.class > grant.max_context_class {
        return Err((
            DenyReason::Egress,
            format!(
                "the context is {}, and {tool:?} may carry out at most {}",
                class_name(context.class),
                class_name(grant.max_context_class)
            ),
        ));
    }
    if context.untrusted && grant.when_untrusted == WhenUntrusted::Deny {
        return Err((
            DenyReason::UntrustedContext,
            format!("the grant for {tool:?} says when_untrusted = deny"),
        ));
    }
    rate_limit(grant, request, counters)
}

/// The grant's `max_calls_per_turn` for the request's counted turn.
fn rate_limit(
    grant: &Grant,
    request: &ToolRequest,
    counters: &CallCounters,
) -> Result<(), (DenyReason, String)> {
    let tool = request.tool.as_str();
    if let Some(max) = grant.max_calls_per_turn {
        // A subagent's calls count against its top-level session's turn (`counts_for`).
        let counted = request.counted_turn();
        let used = counters.count(&counted.session, counted.turn, tool);
        if used >= max {
            return Err((
                DenyReason::RateLimit,
                format!(
                    "{tool:?} may be called {max} times per turn, and turn {} of session {:?} \
                     (its subagents' calls included) has used them",
                    counted.turn,
                    counted.session.as_str()
                ),
            ));
        }
    }
    Ok(())
}

/// The class as config and labels write it (`public`, ...).
pub fn class_name(class: bxcore::DataClass) -> &'static str {
    use bxcore::DataClass::{Internal, Private, Public, Secret};
    match class {
        Public => "public",
        Internal => "internal",
        Private => "private",
        Secret => "secret",
    }
}

/// The arguments text as a JSON object; blank text is `{}`. An object that holds a key twice,
/// at any depth, is refused naming the key (serde_json would keep the last, a reader the first:
/// the owner and the tool must see one value). The error quotes no value, only a repeated key.
pub fn parse_arguments(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match parse_no_duplicates(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(format!(
            "they must be a JSON object, not {}",
            json_kind(&other)
        )),
        Err(JsonError::DuplicateKey { key }) => Err(format!(
            "they hold the key {} twice: give each key once",
            shown_key(&key)
        )),
        Err(JsonError::Invalid(e)) => Err(format!(
            "they are not valid JSON ({} at line {} column {})",
            json_error_kind(&e),
            e.line(),
            e.column()
        )),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// serde_json's category of a parse error, without its message (which may quote the text).
fn json_error_kind(e: &serde_json::Error) -> &'static str {
    use serde_json::error::Category;
    match e.classify() {
        Category::Eof => "the text ends too early",
        Category::Syntax => "a syntax error",
        Category::Data => "a value out of range",
        Category::Io => "a read error",
    }
}
