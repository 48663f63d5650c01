//! One tool call: checked, dispatched (answered by loopd or sent to the port), capped and
//! labelled.

use super::{Runtime, Stop};
use crate::baseline;
use crate::outcome::{CallOutcome, neutralised};
use crate::outputs::{self, Page, READ_OUTPUT};
use crate::session::Session;
use crate::tools::{
    CALL_TOOL, Dispatch, FIND_TOOL, cap_result, dispatch, duplicate_key_message, find_tool_labels,
};
use bxcore::json::{JsonError, parse_no_duplicates};
use bxcore::{CallId, Labels, ToolCall, ToolOutcome, TurnEvent, denial_message};
use proto::{ToolRequest, ToolResponse, TurnRef};

/// Runs `tool_call` (number `call` in `session`): a name outside the epoch's tools array or
/// arguments that are not JSON (or hold a key twice, at any depth) get a clear answer back to
/// the model; everything else goes through `dispatch`, and a call for the port of a tool in
/// `[loop] owner_paths_tools` naming a path the owner did not give is answered by loopd
/// (`provenance`). `stop` also stops a subagent the call runs, whose events reach `on_event`
/// as [`TurnEvent::Subagent`]. A call brokerd asks the owner about waits for the
/// answer (`approval`): its request and decision are appended to `session` as they happen.
pub fn run_call(
    rt: &Runtime<'_>,
    session: &mut Session,
    call: CallId,
    tool_call: &ToolCall,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> CallOutcome {
    if let Some(problem) = check_call(rt, session, tool_call) {
        return CallOutcome::local(problem, ToolOutcome::Failed);
    }
    let cap_bytes = rt.cfg.r#loop.result_cap_bytes(rt.n_ctx);
    let direct = read_output_is_direct(session);
    if let Some(arguments) = outputs::read_output_call(&tool_call.name, &tool_call.arguments) {
        return read_output(session, &arguments, cap_bytes, direct);
    }
    let outcome = match dispatch(rt.registry, &tool_call.name, &tool_call.arguments) {
        // `find_tool` quotes external tools' descriptions: it carries their labels.
        Dispatch::Local(text) if tool_call.name == FIND_TOOL => CallOutcome::local_labelled(
            text,
            ToolOutcome::Ok,
            find_tool_labels(rt.registry, &tool_call.arguments),
        ),
        Dispatch::Local(text) => CallOutcome::local(text, ToolOutcome::Ok),
        Dispatch::Redirect(text) => CallOutcome::local(text, ToolOutcome::Redirected),
        Dispatch::Subagent { task } => rt.children.run(rt, session, &task, call, stop, on_event),
        Dispatch::Port { tool, arguments } => {
            // An acting call whose path the owner never gave is answered here, before brokerd
            // (or the owner) hears of it.
            let checked = &rt.cfg.r#loop.owner_paths_tools;
            if let Some(refused) = super::provenance::check(checked, session, &tool, &arguments) {
                return cap(refused, cap_bytes, session, call, direct);
            }
            let request = ToolRequest {
                session: session.id().clone(),
                turn: session.open_turn().unwrap_or(session.last_turn()),
                call,
                tool,
                arguments,
                context: baseline::context_labels(session),
                counts_for: session.root_turn().map(|(session, turn)| TurnRef {
                    session: session.clone(),
                    turn,
                }),
                approval: None,
            };
            // The model waits for brokerd: its main slot is given back meanwhile, so another
            // session's turn runs on it (issue 36), and taken again once the result is durable.
            rt.owner.release_slot();
            match rt.port.call_until(&request, stop.token()) {
                ToolResponse::Ask { approval } => {
                    super::approval::ask_owner(rt, session, request, approval, stop, on_event)
                }
                response => from_port(response),
            }
        }
    };
    cap(outcome, cap_bytes, session, call, direct)
}

/// Whether `read_output` is in the epoch's tools array (else it is reached through
/// `call_tool`).
/// Without call_tool in the array (every tool is core, issue 34) it is called directly though
/// the array does not show it: shown, the default model called it at random.
fn read_output_is_direct(session: &Session) -> bool {
    session.current_baseline().is_some_and(|b| {
        let names = baseline::tool_names(b);
        names.contains(READ_OUTPUT) || !names.contains(CALL_TOOL)
    })
}

/// Answers `read_output` from the session's stored outputs: a page carries the labels of the
/// output it comes from, so reading a private or untrusted result back keeps the context so.
fn read_output(session: &Session, arguments: &str, cap_bytes: usize, direct: bool) -> CallOutcome {
    match outputs::read_page(session.dir(), arguments, cap_bytes, direct) {
        Page::Text { content, labels } => {
            CallOutcome::local_labelled(content, ToolOutcome::Ok, labels)
        }
        Page::Refused(why) => CallOutcome::local(why, ToolOutcome::Failed),
    }
}

/// Why a call cannot run as asked, in words for the model.
fn check_call(rt: &Runtime<'_>, session: &Session, tool_call: &ToolCall) -> Option<String> {
    let name = &tool_call.name;
    let array: Vec<&str> = session
        .current_baseline()
        .map(|b| b.tools.iter().map(|t| t.name.as_str()).collect())
        .unwrap_or_default();
    // read_output is loopd's own and reads only this session's outputs: without call_tool it
    // is called directly, though not shown (see `read_output_is_direct`).
    let hidden_read_output = name == READ_OUTPUT && !array.contains(&CALL_TOOL);
    if !array.contains(&name.as_str()) && !hidden_read_output {
        // Without find_tool and call_tool (every tool is in the array, issue 34) the model is
        // told what it has, never pointed at a tool it does not have.
        let hint = if rt.registry.get(name).is_some() && array.contains(&CALL_TOOL) {
            format!(
                "call it through call_tool with {{\"name\": \"{name}\", \"arguments\": {{...}}}}"
            )
        } else if array.contains(&FIND_TOOL) {
            "use find_tool to search for a tool that does what you need".to_string()
        } else {
            format!(
                "your tools are {}; if none of them can do it, tell the owner so",
                array.join(", ")
            )
        };
        return Some(format!(
            "There is no tool named \"{name}\" in your tools array: {hint}."
        ));
    }
    // Strict: a key given twice (serde_json would keep the last, a reader of the approval the
    // first) is refused here, before the call can reach brokerd or the owner.
    match parse_no_duplicates(&tool_call.arguments) {
        Ok(_) => None,
        Err(JsonError::DuplicateKey { key }) => Some(duplicate_key_message(name, &key)),
        Err(JsonError::Invalid(e)) => Some(format!(
            "The arguments of {name} are not valid JSON ({e}). Call it again with a JSON \
             object that fits its schema."
        )),
    }
}

/// A port's answer as an outcome, with the answer's labels: a result's, or for a failure or
/// refusal the tool's when a tool wrote it (public and trusted only for the broker's own
/// words). Untrusted text is neutralised before the model sees it, failures included.
pub(super) fn from_port(response: ToolResponse) -> CallOutcome {
    let labels = response.labels();
    let (content, truncated, outcome) = match response {
        ToolResponse::Result {
            content, truncated, ..
        } => (content, truncated, ToolOutcome::Ok),
        ToolResponse::Failed { message, .. } => (message, false, ToolOutcome::Failed),
        // `run_call` hands every question to `approval`; this arm keeps the match whole.
        ToolResponse::Ask { approval } => (
            format!(
                "brokerd asks the owner to approve this call of {} again, and nothing ran",
                approval.tool
            ),
            false,
            ToolOutcome::Denied {
                reason: bxcore::DenyReason::NotApproved,
            },
        ),
        ToolResponse::Denied { reason, detail, .. } => (
            format!(
                "{} {}",
                denial_message(reason, detail.as_deref()),
                after_denial(reason)
            ),
            false,
            ToolOutcome::Denied { reason },
        ),
    };
    CallOutcome {
        content: neutralised(content, labels.untrusted),
        class: labels.class,
        untrusted: labels.untrusted,
        truncated,
        outcome,
        by_loopd: false,
    }
}

/// What the model should do after a refusal, in words a small model acts on (issue 34: on
/// the default model a refused call was retried, wrapped in call_tool, until the step limit).
/// Only arguments that do not fit can be put right; every other refusal holds for the task.
pub const RETRY_WITH_VALID_ARGUMENTS: &str =
    "Call it again only with arguments that fit its schema.";
/// See [`RETRY_WITH_VALID_ARGUMENTS`].
pub const DO_NOT_RETRY: &str = "Do not call it again in this task: tell the owner it was \
     refused, and answer with what you have.";

/// The next step after a refusal for `reason`.
fn after_denial(reason: bxcore::DenyReason) -> &'static str {
    match reason {
        bxcore::DenyReason::InvalidArguments => RETRY_WITH_VALID_ARGUMENTS,
        _ => DO_NOT_RETRY,
    }
}

/// `text`, neutralised when `untrusted`.
/// Cuts the content to the cap. The full content is kept under a handle beside the session,
/// with the result's labels, and the model is told how to read on; should storing fail, the
/// cut is marked as before (`[truncated]`) and the failure logged.
fn cap(
    mut outcome: CallOutcome,
    cap_bytes: usize,
    session: &Session,
    call: CallId,
    direct: bool,
) -> CallOutcome {
    if outcome.content.len() > cap_bytes {
        let labels = Labels::new(outcome.class, outcome.untrusted);
        match outputs::store(session.dir(), call, &outcome.content, labels) {
            Ok(handle) => {
                let total = outcome.content.len();
                let shown = outputs::floor_boundary(&outcome.content, cap_bytes);
                outcome.content.truncate(shown);
                outcome
                    .content
                    .push_str(&outputs::truncation_note(&handle, shown, total, direct));
                outcome.truncated = true;
                return outcome;
            }
            Err(e) => tracing::warn!(
                session = %session.id(),
                %call,
                error = %e,
                "could not store a capped tool result; the rest is lost"
            ),
        }
    }
    let (content, cut) = cap_result(&outcome.content, cap_bytes);
    outcome.content = content;
    outcome.truncated |= cut;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use bxcore::DenyReason;

    fn denied(reason: DenyReason) -> String {
        from_port(ToolResponse::Denied {
            reason,
            detail: Some("why".to_string()),
            labels: None,
        })
        .content
    }

    /// Issue 34: a refusal says what to do next, so a small model answers instead of retrying.
    #[test]
    fn a_refusal_tells_the_model_its_next_step() {
        let untrusted = denied(DenyReason::UntrustedContext);
        assert!(untrusted.ends_with(DO_NOT_RETRY), "{untrusted}");
        assert!(untrusted.starts_with("Denied: "), "{untrusted}");
        let arguments = denied(DenyReason::InvalidArguments);
        assert!(
            arguments.ends_with(RETRY_WITH_VALID_ARGUMENTS),
            "{arguments}"
        );
    }
}
