//! Opted-in tool-output summaries (seed M5d2-08, SPEC 4.3): after a turn, each result of a tool
//! named in `[compact] summarise` gets a short `ToolSummary` made on the background slot,
//! labelled as derived from the result in the session's context (`Labels::derived`: the model
//! that wrote it read the whole context). Summaries are never replayed within their epoch; compaction uses them
//! in place of the results.

use crate::baseline::messages_with_carry;
use crate::compact::cap_chars;
use crate::config::Config;
use crate::llama::{ChatMessage, ChatRequest, Client};
use crate::session::Session;
use crate::tools::CALL_TOOL;
use bxcore::sanitize::neutralise;
use bxcore::{CallId, DataClass, Labels, LogRecord, Timestamp, ToolCall};
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The prompt file of a summary, beside the system prompt.
pub const SUMMARISE_PROMPT_FILE: &str = "summarise.md";

/// A result waiting for its summary: call, tool call id, content, class, untrusted.
type Pending = (CallId, String, String, DataClass, bool);

/// Append a `ToolSummary` for each opted-in `ToolResult` in this epoch that does not yet have
/// one. Inference uses the background slot and no tools. A failed model call skips that result
/// (logged); a missing prompt file (when something is to be summarised) or a refused append is
/// the error.
pub fn missing(cfg: &Config, client: &Client, session: &mut Session) -> Result<(), String> {
    let pending = queue(cfg, session);
    if pending.is_empty() {
        return Ok(());
    }
    let path = cfg.baseline.system.with_file_name(SUMMARISE_PROMPT_FILE);
    let prompt = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    for (call, tool_call_id, content, class, untrusted) in pending {
        let Some(baseline) = session.current_baseline() else {
            return Err("the epoch has no baseline yet".to_string());
        };
        let mut messages = messages_with_carry(baseline, session.epoch_records(), session.carry());
        messages.push(ChatMessage::User {
            content: format!(
                "{}\n\n{}",
                prompt.trim_end(),
                cap_chars(&content, cfg.r#loop.tool_result_cap_bytes)
            ),
        });
        let request = ChatRequest {
            slot: cfg.slots.background,
            messages,
            tools: Vec::new(),
            thinking: true,
        };
        let text = match client.chat_with_retry(&request, &mut |_| {}) {
            Ok(completion) => completion.content.unwrap_or_default(),
            Err(e) => {
                tracing::warn!(session = %session.id(), error = %e, "loopd: tool summary");
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
                    names.insert(id, tool_name(name, arguments));
                }
            }
            LogRecord::ToolSummary { call, .. } => {
                done.insert(call.0);
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
            ..
        } = record
        {
            if done.contains(&call.0) {
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
                content.clone(),
                *class,
                *untrusted,
            ));
        }
    }
    pending
}

/// The tool a call runs: the name itself, or for `call_tool` the `name` in its arguments (so a
/// non-core tool such as `http_fetch` is matched by its own name).
fn tool_name(name: &str, arguments: &str) -> String {
    if name == CALL_TOOL
        && let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments)
        && let Some(Value::String(inner)) = args.get("name")
    {
        return inner.clone();
    }
    name.to_string()
}
