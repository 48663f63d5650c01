//! `subagent {task}` (SPEC 6): loopd answers it itself by running `task` as a full turn in a
//! child session `sub-<parent>-<n>`, on the `subagent` slot with `subagent.md` as the system
//! prompt and the same tool port (the child's calls carry the child's id, so brokerd's `sub-*`
//! grants apply). The child's final answer comes back as the tool result, labelled with the
//! child's context label, so whatever the child read taints the parent as if it had read it.

#[cfg(test)]
mod tests;

use crate::baseline;
use crate::config::Config;
use crate::outcome::CallOutcome;
use crate::runtime::{Children, Runtime, Stop};
use crate::session::Session;
use crate::tools::{Entry, Registry};
use crate::turn::{TurnError, run_foreground, start_turn};
use bxcore::{CallId, Labels, LogRecord, SessionId, Timestamp, ToolOutcome, TurnEnd, TurnEvent};
use proto::ToolSchema;
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio_util::task::AbortOnDropHandle;

/// The name of the tool that hands a sub-task to a child session. loopd answers it.
pub const SUBAGENT: &str = proto::SUBAGENT;
/// The prefix of every child session's id (reserved: clients cannot use it).
pub use proto::api::reserved::CHILD_PREFIX;
/// The child's system prompt file, read from the directory of `[baseline] system`.
pub const SUBAGENT_PROMPT: &str = "subagent.md";
/// How the model sees `subagent`.
pub fn schema() -> ToolSchema {
    ToolSchema {
        name: SUBAGENT.to_string(),
        description: "Hand a self-contained sub-task to a helper that works in its own session \
                      with its own tools and returns its final answer."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "task": {
                    "type": "string",
                    "description": "Everything the helper needs to know: it sees nothing of this conversation."
                }
            },
            "required": ["task"]
        }),
    }
}

/// `sub-<parent>-<n>`, or the raw string that would not fit a `SessionId`.
pub fn child_id(parent: &SessionId, n: CallId) -> Result<SessionId, String> {
    let raw = format!("sub-{}-{}", parent.as_str(), n.0);
    SessionId::new(&raw).map_err(|_| raw)
}

/// How many `sub-` levels down `session` is: 0 for a session the user started.
pub fn depth(session: &SessionId) -> u32 {
    let mut rest = session.as_str();
    let mut depth = 0;
    while let Some(inner) = rest.strip_prefix(CHILD_PREFIX) {
        depth += 1;
        rest = inner;
    }
    depth
}

/// `base` with `subagent` as a core tool when `[subagent] enabled` and `session` is above
/// `max_depth`; without it otherwise.
pub fn registry_for(base: &Registry, session: &SessionId, cfg: &Config) -> Registry {
    if offered(session, cfg) {
        base.with(Entry {
            schema: schema(),
            core: true,
        })
    } else {
        base.without(SUBAGENT)
    }
}

fn offered(session: &SessionId, cfg: &Config) -> bool {
    cfg.subagent.enabled && depth(session) < cfg.subagent.max_depth
}

/// loopd's child runner: a `subagent` call runs [`run`]. Every [`Runtime`] of a daemon
/// carries it (`Runtime::children`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Subagents;

impl Children for Subagents {
    fn run(
        &self,
        rt: &Runtime<'_>,
        parent: &Session,
        task: &str,
        call: CallId,
        stop: &Stop,
        on_event: &mut dyn FnMut(&TurnEvent),
    ) -> CallOutcome {
        run(rt, parent, task, call, stop, on_event)
    }
}

/// Runs `task` in the child session of `parent`'s call `call`, to its end, and gives its
/// answer (or why there is none) as the call's outcome. Stopping `stop` stops the child; the
/// child's events reach `on_event` wrapped in [`TurnEvent::Subagent`].
pub fn run(
    rt: &Runtime<'_>,
    parent: &Session,
    task: &str,
    call: CallId,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> CallOutcome {
    if !offered(parent.id(), rt.cfg) {
        return CallOutcome::not_run(
            "Not run: this session may not start subagents (disabled, or at the depth limit).",
        );
    }
    let max_children = rt.cfg.subagent.max_children_per_turn;
    if children_this_turn(parent) >= u64::from(max_children) {
        return CallOutcome::not_run(&format!(
            "Not run: this turn already started {max_children} subagent(s), the limit. \
             Do the rest yourself."
        ));
    }
    let id = match child_id(parent.id(), call) {
        Ok(id) => id,
        Err(raw) => {
            return CallOutcome::not_run(&format!(
                "Not run: the child session id \"{raw}\" would be {} bytes, longer than a \
                 session id may be (64). Do this sub-task yourself.",
                raw.len()
            ));
        }
    };
    let prompt_path = rt.cfg.baseline.system.with_file_name(SUBAGENT_PROMPT);
    let system = match baseline::read_system_prompt(&prompt_path) {
        Ok(text) => text,
        // `{:#}`: the error with its cause (the OS error), which it does not repeat itself.
        Err(e) => return CallOutcome::not_run(&format!("Not run: {:#}", anyhow::Error::new(e))),
    };
    let mut child = match parent.store().create(&id) {
        Ok(child) => child,
        Err(e) => {
            return CallOutcome::not_run(&format!("Not run: the child session {id}: {e}"));
        }
    };
    // The task is made from everything the parent had read: the child starts at the parent's
    // context label, durably, before it reads anything itself (with its task's user record,
    // whose sync also makes the new child session: `session::create`).
    let handed_down = baseline::context_labels(parent);
    if let Err(e) = child.append_synced_with_next(inherited_record(parent, handed_down)) {
        return CallOutcome::not_run(&format!("Not run: the child session {id}: {e}"));
    }
    if let Err(e) = start_turn(&mut child, task) {
        return CallOutcome::not_run(&format!("Not run: the child session {id}: {e}"));
    }
    let mut cfg = rt.cfg.clone();
    let models = rt.models.for_child();
    cfg.r#loop.max_steps = rt.cfg.subagent.max_steps;
    // A port that decides per session (brokerd) offers the child what `sub-*` grants allow,
    // which need not be what the parent may call.
    let base = match rt.port.catalogue(&id) {
        Some(catalogue) => crate::toolset::registry(&catalogue, &rt.cfg.broker.core_tools),
        None => rt.registry.clone(),
    };
    let registry = registry_for(&base, &id, rt.cfg);
    let child_rt = Runtime {
        cfg: &cfg,
        models: &models,
        blocking: rt.blocking,
        port: rt.port,
        registry: &registry,
        system: &system,
        n_ctx: rt.n_ctx,
        children: rt.children,
        owner: rt.owner,
        meter: rt.meter,
    };
    let timeout = Duration::from_millis(rt.cfg.subagent.timeout_ms);
    let mut forward = |event: &TurnEvent| {
        on_event(&TurnEvent::Subagent {
            session: id.clone(),
            event: Box::new(event.clone()),
        });
    };
    let (result, timed_out) = run_watched(&child_rt, &mut child, stop, timeout, &mut forward);
    outcome(&child, result, timed_out, rt.cfg.subagent.timeout_ms)
}

/// The `Inherited` record that starts a child of `parent`: the parent's context label
/// `labels`, and the top-level turn the child's calls count against (the parent's own, or the
/// one the parent inherited).
fn inherited_record(parent: &Session, labels: Labels) -> LogRecord {
    let (root_session, root_turn) = match parent.root_turn() {
        Some((session, turn)) => (session.clone(), turn),
        None => (
            parent.id().clone(),
            parent.open_turn().unwrap_or(parent.last_turn()),
        ),
    };
    LogRecord::Inherited {
        time: Timestamp::now(),
        parent: parent.id().clone(),
        class: labels.class,
        untrusted: labels.untrusted,
        root_session,
        root_turn,
    }
}

/// Runs the child's turn under a child of the parent's stop (stopping the parent stops it),
/// cancelled by a timer task when `timeout` passes. Returns the turn's result and whether it
/// ran out of time.
fn run_watched(
    rt: &Runtime<'_>,
    child: &mut Session,
    parent_stop: &Stop,
    timeout: Duration,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> (Result<TurnEnd, TurnError>, bool) {
    let child_stop = parent_stop.child();
    let timed_out = Arc::new(AtomicBool::new(false));
    // Aborted when dropped, that is when the child's turn ends first.
    let _timer = {
        let (token, timed_out) = (child_stop.token().clone(), Arc::clone(&timed_out));
        AbortOnDropHandle::new(rt.blocking.handle().spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(timeout) => {
                    timed_out.store(true, Ordering::SeqCst);
                    token.cancel();
                }
                () = token.cancelled() => {}
            }
        }))
    };
    // A child never gets a second task, so the background work after a turn (summaries
    // and compaction, for the session's later turns) would only keep its parent waiting.
    let result = run_foreground(rt, child, &child_stop, on_event);
    (result, timed_out.load(Ordering::SeqCst))
}

/// The parent's tool result from the child's end: its last answer on `Done`, else why not;
/// either way labelled as derived from the child's context (which holds what it inherited).
fn outcome(
    child: &Session,
    result: Result<TurnEnd, TurnError>,
    timed_out: bool,
    timeout_ms: u64,
) -> CallOutcome {
    let labels = Labels::derived(baseline::context_labels(child), child.inherited());
    let id = child.id();
    let (content, outcome) = match result {
        Ok(TurnEnd::Done) => {
            let answer = last_answer(child);
            let answer = if answer.is_empty() {
                "(the subagent gave an empty answer)".to_string()
            } else {
                answer
            };
            (answer, ToolOutcome::Ok)
        }
        Ok(_) if timed_out => (
            format!("The subagent {id} ran out of its time ({timeout_ms} ms) and was stopped."),
            ToolOutcome::Failed,
        ),
        Ok(end) => (
            format!(
                "The subagent {id} ended without an answer: {}.",
                describe(&end)
            ),
            ToolOutcome::Failed,
        ),
        Err(e) => (
            format!("The subagent {id} failed: {e}."),
            ToolOutcome::Failed,
        ),
    };
    CallOutcome::local_labelled(content, outcome, labels)
}

fn describe(end: &TurnEnd) -> String {
    match end {
        TurnEnd::Done => "done".to_string(),
        TurnEnd::Cancelled => "cancelled".to_string(),
        TurnEnd::Interrupted => "interrupted".to_string(),
        TurnEnd::MaxSteps => "it reached its step limit".to_string(),
        TurnEnd::Failed { reason } => reason.clone(),
        TurnEnd::Budget { message, .. } => message.clone(),
    }
}

/// The content of the session's last assistant record.
fn last_answer(session: &Session) -> String {
    session
        .records()
        .iter()
        .rev()
        .find_map(|r| match r {
            LogRecord::Assistant { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// How many `subagent` calls of the open turn already have a result.
fn children_this_turn(session: &Session) -> u64 {
    let records = session.records();
    let start = records
        .iter()
        .rposition(|r| matches!(r, LogRecord::User { .. }))
        .unwrap_or(0);
    let mut calls = HashSet::new();
    let mut count = 0;
    for record in &records[start..] {
        match record {
            LogRecord::Assistant { tool_calls, .. } => {
                calls.extend(
                    tool_calls
                        .iter()
                        .filter(|c| is_subagent_call(&c.name, &c.arguments))
                        .map(|c| c.id.clone()),
                );
            }
            LogRecord::ToolResult { tool_call_id, .. } if calls.contains(tool_call_id) => {
                count += 1;
            }
            _ => {}
        }
    }
    count
}

fn is_subagent_call(name: &str, arguments: &str) -> bool {
    name == SUBAGENT
        || (name == crate::tools::CALL_TOOL
            && serde_json::from_str::<Value>(arguments)
                .ok()
                .and_then(|v| v.get("name").and_then(Value::as_str).map(|n| n == SUBAGENT))
                .unwrap_or(false))
}
