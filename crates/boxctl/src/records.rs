//! A session's log records as readable lines, for `boxctl show`: one per record, and one per
//! tool call an answer asked for. Everything that came from the model or a tool is made safe
//! for a terminal first.

use crate::format::{
    MAX_RESULT_PREVIEW_CHARS, end_words, label_words, one_line, tool_call_line, tool_result_line,
};
use crate::safe_text::{in_full, terminal_safe};
use bxcore::LogRecord;

/// The time of day of `time`, `HH:MM:SS` (UTC).
fn clock(time: &bxcore::Timestamp) -> String {
    let text = time.to_rfc3339();
    text.get(11..19).map_or(text.clone(), str::to_string)
}

/// The line of an epoch's baseline: how many tools its array offers.
fn baseline_line(epoch: u32, baseline: &serde_json::Value) -> String {
    let tools = baseline["tools"].as_array().map_or(0, Vec::len);
    format!("── epoch {epoch}'s baseline: the system prompt and {tools} tool(s)")
}

/// A session record as readable lines: one per record, and one per tool call an answer asked
/// for. Reasoning is shown only when `show_reasoning`.
pub fn record_lines(record: &LogRecord, show_reasoning: bool) -> Vec<String> {
    match record {
        LogRecord::Header { session, time, .. } => {
            vec![format!("── session {session}, created {time}")]
        }
        LogRecord::Baseline { epoch, baseline } => vec![baseline_line(*epoch, baseline)],
        LogRecord::EpochStart {
            time, epoch, carry, ..
        } => vec![format!(
            "{} ── epoch {epoch} begins (carry of {} chars)",
            clock(time),
            carry.chars().count()
        )],
        LogRecord::User {
            time,
            turn,
            content,
            ..
        } => vec![format!(
            "{} user [turn {turn}]: {}",
            clock(time),
            one_line(content, None)
        )],
        LogRecord::Overheard {
            time,
            from,
            content,
            ..
        } => vec![format!(
            "{} overheard from {} (untrusted): {}",
            clock(time),
            one_line(from, Some(MAX_RESULT_PREVIEW_CHARS)),
            one_line(content, Some(MAX_RESULT_PREVIEW_CHARS))
        )],
        LogRecord::Assistant {
            time,
            content,
            reasoning,
            tool_calls,
            ..
        } => {
            let at = clock(time);
            let mut lines = Vec::new();
            if let Some(reasoning) = reasoning.as_deref().filter(|_| show_reasoning) {
                lines.push(format!("{at} thinking: {}", one_line(reasoning, None)));
            }
            if !content.trim().is_empty() || tool_calls.is_empty() {
                lines.push(format!("{at} assistant: {}", one_line(content, None)));
            }
            lines.extend(
                tool_calls
                    .iter()
                    .map(|c| format!("{at} {}", tool_call_line(c))),
            );
            lines
        }
        LogRecord::PartialAnswer {
            time,
            content,
            reasoning,
        } => {
            // Marked: the turn was stopped mid-answer, the model never finished this.
            let at = clock(time);
            let mut lines = Vec::new();
            if let Some(reasoning) = reasoning.as_deref().filter(|_| show_reasoning) {
                lines.push(format!(
                    "{at} thinking (stopped): {}",
                    one_line(reasoning, None)
                ));
            }
            lines.push(format!(
                "{at} assistant (stopped mid-answer): {}",
                one_line(content, None)
            ));
            lines
        }
        LogRecord::ToolResult {
            time,
            call,
            content,
            untrusted,
            truncated,
            outcome,
            by_loopd,
            ..
        } => {
            let head = tool_result_line(outcome, content.len() as u64, *truncated, *untrusted);
            let preview = one_line(content, Some(MAX_RESULT_PREVIEW_CHARS));
            // loopd's own answers never reach brokerd's audit log: this record is their trail.
            let by = if *by_loopd { ", answered by loopd" } else { "" };
            vec![format!(
                "{} {head} (call {call}{by}): {preview}",
                clock(time)
            )]
        }
        LogRecord::Inherited {
            time,
            parent,
            class,
            untrusted,
            root_session,
            root_turn,
        } => vec![format!(
            "{} ── inherits [{}] from {}; its calls count against {}#{root_turn}",
            clock(time),
            label_words(*class, *untrusted),
            terminal_safe(parent.as_str()),
            terminal_safe(root_session.as_str()),
        )],
        LogRecord::ToolSummary {
            time,
            call,
            content,
            ..
        } => vec![format!(
            "{} summary of call {call}: {}",
            clock(time),
            one_line(content, None)
        )],
        LogRecord::TurnEnd { time, turn, end } => {
            vec![format!(
                "{} turn {turn} ended: {}",
                clock(time),
                end_words(end)
            )]
        }
        LogRecord::ApprovalRequested {
            time,
            approval,
            tool,
            arguments,
            reason,
            ..
        } => vec![format!(
            "{} approval {approval} asked: {} {} ({})",
            clock(time),
            in_full(tool),
            in_full(arguments),
            in_full(reason)
        )],
        LogRecord::ApprovalDecided {
            time,
            approval,
            decision,
            uid,
            reason,
            ..
        } => {
            let by = uid.map(|uid| format!(" by uid {uid}")).unwrap_or_default();
            let why = reason
                .as_deref()
                .map(|r| format!(": {}", one_line(r, None)))
                .unwrap_or_default();
            vec![format!(
                "{} approval {approval} {decision}{by}{why}",
                clock(time)
            )]
        }
        LogRecord::Note { time, text } => {
            vec![format!("{} note: {}", clock(time), one_line(text, None))]
        }
        LogRecord::Undone {
            time,
            from_turn,
            to_turn,
            files,
        } => vec![format!(
            "{} ── turns {from_turn} to {to_turn} undone ({files} file(s) put back); the model no longer sees them",
            clock(time)
        )],
    }
}
