//! Opted-in tool-output summaries (seed M5d2-08, SPEC 4.3): after a turn, each result of a tool
//! named in `[compact] summarise` that ran and succeeded gets a short `ToolSummary` made on the
//! background slot, labelled as derived from the result in the session's context
//! (`Labels::derived`: the model that wrote it read the whole context). Summaries are never
//! replayed within their epoch; compaction uses them in place of the results.
//!
//! Denials, failures and calls that were not run are not summarised: there is nothing in them
//! worth a model call. Each result is tried once: a failed summary is a `Note` in the session
//! log naming the call ([`FAILED_NOTE`]) and that result is kept whole, never tried again, so a
//! summary that cannot be made does not cost a model call after every turn.

use crate::baseline::messages_with_carry;
use crate::config::Config;
use crate::llama::{ChatEvent, ChatMessage, ChatRequest, InferError};
use crate::runtime::{Background, BackgroundOutcome, Runtime, micros_since};
use crate::session::Session;
use crate::text::cap_chars;
use crate::tools::target_tool;
use bxcore::sanitize::neutralise;
use bxcore::{CallId, DataClass, Labels, LogRecord, Timestamp, ToolCall, ToolOutcome};
use chrono::Utc;
use std::collections::{HashMap, HashSet};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The prompt file of a summary, beside the system prompt.
pub const SUMMARISE_PROMPT_FILE: &str = "summarise.md";

/// How the `Note` of a failed summary starts, followed by the call's number, `: ` and why.
pub const FAILED_NOTE: &str = "tool summary failed for call";

/// A result waiting for its summary: call, tool call id, tool, content, class, untrusted.
type Pending = (CallId, String, String, String, DataClass, bool);

/// Append a `ToolSummary` for each opted-in result in this epoch that ran and succeeded
/// (`ToolOutcome::Ok`) and was not tried yet. Inference uses the background slot and no tools;
/// an untrusted result is shown after its mark, as in the turn's own messages.
/// A failed model call is a `Note` ([`FAILED_NOTE`]) and that result is not tried again; when
/// the epoch no longer fits the slot, or the day's budget (`[budgets]
/// max_generated_tokens_per_day`) is spent, the results after it are noted the same way
/// without a call. A summary counts in no turn's budget, so its answer is capped at what the
/// day leaves. A missing prompt file (when something is to be summarised) or
/// a refused append is the error.
pub fn missing(rt: &Runtime<'_>, session: &mut Session) -> Result<(), String> {
    let cfg = rt.cfg;
    let pending = queue(cfg, session);
    if pending.is_empty() {
        return Ok(());
    }
    let path = cfg.baseline.system.with_file_name(SUMMARISE_PROMPT_FILE);
    let prompt = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let cap_bytes = cfg.r#loop.result_cap_bytes(rt.n_ctx);
    // Why the results left are not tried: the epoch is full, or the day's budget is spent.
    let mut skip_rest: Option<String> = None;
    for (call, tool_call_id, tool, content, class, untrusted) in pending {
        let generated_today = rt.meter.generated_today();
        let day_left = crate::budget::day::left(&cfg.budgets, generated_today);
        if skip_rest.is_none() && day_left == Some(0) {
            let why = crate::budget::day::spent(&cfg.budgets, generated_today, Utc::now())
                .unwrap_or_default();
            skip_rest = Some(format!("not tried: the day's budget is spent ({why})"));
        }
        if let Some(why) = &skip_rest {
            note_failure(session, call, why)?;
            continue;
        }
        let Some(baseline) = session.current_baseline() else {
            return Err("the epoch has no baseline yet".to_string());
        };
        let mut messages = messages_with_carry(baseline, session.epoch_records(), session.carry());
        let content = cap_chars(&content, cap_bytes);
        messages.push(ChatMessage::User {
            content: format!(
                "{}\n\n{}",
                prompt.trim_end(),
                crate::untrusted::shown(&content, untrusted, Some(&tool))
            ),
        });
        let request = ChatRequest {
            slot: rt.models.background.slot,
            messages,
            tools: Vec::new(),
            thinking: true,
            banned: Vec::new(),
        };
        // A summary counts in no turn's budget: it may generate no more than the day leaves.
        let capped;
        let background = &rt.models.background.client;
        let client = match day_left {
            Some(left) if left < u64::from(background.options().max_tokens.unwrap_or(u32::MAX)) => {
                capped = background.with_max_tokens(u32::try_from(left).unwrap_or(u32::MAX));
                &capped
            }
            _ => background,
        };
        let never = CancellationToken::new();
        let mut ignore = |_: &ChatEvent| {};
        let chat = client.chat_with_retry(&request, &mut ignore, &never);
        let started = Instant::now();
        let answered = rt.blocking.wait(chat);
        let outcome = match &answered {
            Ok(completion) => {
                let timings = completion.timings.map(Into::into);
                rt.meter.background_call(
                    &completion.usage,
                    timings.as_ref(),
                    micros_since(started),
                );
                BackgroundOutcome::Ok
            }
            Err(_) => BackgroundOutcome::Failed,
        };
        rt.meter
            .background_done(Background::Summary, outcome, started.elapsed());
        let text = match answered {
            Ok(completion) => completion.content.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(session = %session.id(), %call, error = %e, "loopd: tool summary");
                if matches!(e, InferError::SessionFull { .. }) {
                    skip_rest = Some(format!(
                        "not tried: the epoch no longer fits the slot ({e})"
                    ));
                }
                note_failure(session, call, &e.to_string())?;
                continue;
            }
        };
        let text = cap_chars(neutralise(&text).as_ref(), cfg.compact.summary_chars);
        // The model read the whole context to write it, not only the result.
        let labels = Labels::derived(
            Labels::new(class, untrusted),
            crate::baseline::context_labels(session),
        );
        session
            .append(LogRecord::ToolSummary {
                time: Timestamp::now(),
                call,
                tool_call_id,
                content: text,
                class: labels.class,
                untrusted: labels.untrusted,
            })
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Notes every opted-in result of this epoch not tried yet as not summarised, `why`, without a
/// model call: the results stay whole and are not tried again. For a turn that ended at a
/// budget: the text it fetched must not buy model calls past the budget that ended it.
pub fn skip(cfg: &Config, session: &mut Session, why: &str) -> Result<(), String> {
    for (call, ..) in queue(cfg, session) {
        note_failure(session, call, why)?;
    }
    Ok(())
}

/// Records in the session log that the summary of `call` failed, and why; the result is kept
/// whole and not tried again.
fn note_failure(session: &mut Session, call: CallId, why: &str) -> Result<(), String> {
    session
        .append(LogRecord::Note {
            time: Timestamp::now(),
            text: format!(
                "{FAILED_NOTE} {call}: {why}; the result is kept whole and not summarised"
            ),
        })
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The call a `Note` says the summary of failed, if it is such a note.
fn failed_call(text: &str) -> Option<u64> {
    let rest = text.strip_prefix(FAILED_NOTE)?.strip_prefix(' ')?;
    rest.split(':').next()?.parse().ok()
}

/// The opted-in results of the current epoch without a summary, in log order.
fn queue(cfg: &Config, session: &Session) -> Vec<Pending> {
    let mut names: HashMap<&str, String> = HashMap::new();
    let mut done: HashSet<u64> = HashSet::new();
    for record in session.epoch_records() {
        match record {
            LogRecord::Assistant { tool_calls, .. } => {
                for ToolCall {
                    id,
                    name,
                    arguments,
                } in tool_calls
                {
                    names.insert(id, target_tool(name, arguments));
                }
            }
            LogRecord::ToolSummary { call, .. } => {
                done.insert(call.0);
            }
            LogRecord::Note { text, .. } => {
                if let Some(call) = failed_call(text) {
                    done.insert(call);
                }
            }
            _ => {}
        }
    }
    let mut pending = Vec::new();
    for record in session.epoch_records() {
        if let LogRecord::ToolResult {
            call,
            tool_call_id,
            content,
            class,
            untrusted,
            outcome,
            ..
        } = record
        {
            // Only what ran and succeeded: a denial, a failure or "Not run" says it all.
            if *outcome != ToolOutcome::Ok || done.contains(&call.0) {
                continue;
            }
            let Some(name) = names.get(tool_call_id.as_str()) else {
                continue;
            };
            if !cfg.compact.summarise.iter().any(|n| n == name) {
                continue;
            }
            pending.push((
                *call,
                tool_call_id.clone(),
                name.clone(),
                content.clone(),
                *class,
                *untrusted,
            ));
        }
    }
    pending
}
