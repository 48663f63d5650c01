//! How boxctl shows things to people: pure functions from events, records and answers to
//! text. Everything that came from the model or a tool is made safe for a terminal first.

use crate::approvals::{approval_decided_line, approval_request_text};
use bxcore::{DataClass, ToolCall, ToolOutcome, TurnEnd, TurnEvent};

use crate::safe_text::in_full;
pub use crate::safe_text::{one_line, terminal_safe};

/// The most characters of a tool call's arguments shown on its line.
pub const MAX_ARGUMENT_CHARS: usize = 200;
/// The most characters of a tool result's content shown by `show`.
pub const MAX_RESULT_PREVIEW_CHARS: usize = 160;

const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

/// A tool call as one line: `→ clock {}`.
pub fn tool_call_line(call: &ToolCall) -> String {
    format!(
        "→ {} {}",
        one_line(&call.name, None),
        one_line(call.arguments.trim(), Some(MAX_ARGUMENT_CHARS))
    )
}

/// How a tool call ended, as words: `ok`, `failed`, `denied: no_grant`, `redirected`.
pub fn outcome_words(outcome: &ToolOutcome) -> String {
    match outcome {
        ToolOutcome::Ok => "ok".into(),
        ToolOutcome::Failed => "failed".into(),
        ToolOutcome::Redirected => "redirected".into(),
        ToolOutcome::Denied { reason } => {
            let word = serde_json::to_value(reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| format!("{reason:?}"));
            format!("denied: {word}")
        }
    }
}

/// A tool result as one line: `← ok, 25 bytes`, `← denied: no_grant`, with `truncated` and
/// `untrusted` when they hold.
pub fn tool_result_line(
    outcome: &ToolOutcome,
    bytes: u64,
    truncated: bool,
    untrusted: bool,
) -> String {
    let mut line = format!("← {}", outcome_words(outcome));
    if !matches!(outcome, ToolOutcome::Denied { .. }) {
        line.push_str(&format!(", {bytes} bytes"));
    }
    if truncated {
        line.push_str(", truncated");
    }
    if untrusted {
        line.push_str(", untrusted");
    }
    line
}

/// Why a turn that did not finish ended, for stderr; `None` for `done`.
pub fn end_message(end: &TurnEnd) -> Option<String> {
    match end {
        TurnEnd::Done => None,
        TurnEnd::Cancelled => Some("the turn was cancelled".into()),
        TurnEnd::Failed { reason } => Some(format!("the turn failed: {}", one_line(reason, None))),
        TurnEnd::MaxSteps => Some("the turn stopped at the step limit (loop.max_steps)".into()),
        TurnEnd::Interrupted => Some("the turn was interrupted: loopd stopped while it ran".into()),
        TurnEnd::Budget { message, .. } => Some(format!(
            "the turn stopped at a budget: {}",
            one_line(message, None)
        )),
    }
}

/// Why a subagent's turn that did not finish ended; `None` for `done`. The child's step limit
/// is `subagent.max_steps`, not the parent's.
pub fn child_end_message(end: &TurnEnd) -> Option<String> {
    match end {
        TurnEnd::MaxSteps => {
            Some("the subagent stopped at its step limit (subagent.max_steps)".into())
        }
        other => end_message(other),
    }
}

/// How a turn ended, as words: `done`, `failed: why`.
pub fn end_words(end: &TurnEnd) -> String {
    match end {
        TurnEnd::Done => "done".into(),
        TurnEnd::Cancelled => "cancelled".into(),
        TurnEnd::Failed { reason } => format!("failed: {}", one_line(reason, None)),
        TurnEnd::MaxSteps => "max_steps".into(),
        TurnEnd::Interrupted => "interrupted".into(),
        TurnEnd::Budget { budget, .. } => format!("budget: {}", one_line(budget, None)),
    }
}

/// What printing one event produced: text for stdout and for stderr.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Printed {
    /// For stdout.
    pub out: String,
    /// For stderr.
    pub err: String,
}

/// Turns a stream of turn events into what a person sees: answer text as it streams, one
/// line per tool call and result, retries on stderr.
#[derive(Debug, Clone)]
pub struct EventPrinter {
    show_reasoning: bool,
    color: bool,
    at_line_start: bool,
    in_reasoning: bool,
}

impl EventPrinter {
    /// A printer; `show_reasoning` shows the model's reasoning (dimmed when `color`, else
    /// after a `thinking: ` prefix).
    pub fn new(show_reasoning: bool, color: bool) -> EventPrinter {
        EventPrinter {
            show_reasoning,
            color,
            at_line_start: true,
            in_reasoning: false,
        }
    }

    fn text(&mut self, out: &mut String, text: &str, reasoning: bool) {
        if text.is_empty() {
            return;
        }
        if reasoning != self.in_reasoning {
            if self.in_reasoning && self.color {
                out.push_str(RESET);
            }
            if !self.at_line_start {
                out.push('\n');
                self.at_line_start = true;
            }
            self.in_reasoning = reasoning;
            if reasoning {
                out.push_str(if self.color { DIM } else { "thinking: " });
            }
        }
        let safe = terminal_safe(text);
        out.push_str(&safe);
        self.at_line_start = safe.ends_with('\n');
    }

    /// Ends any open reasoning and line, so that a whole line can follow.
    fn break_line(&mut self, out: &mut String) {
        if self.in_reasoning {
            if self.color {
                out.push_str(RESET);
            }
            self.in_reasoning = false;
        }
        if !self.at_line_start {
            out.push('\n');
            self.at_line_start = true;
        }
    }

    /// What `event` prints.
    pub fn print(&mut self, event: &TurnEvent) -> Printed {
        let mut p = Printed::default();
        match event {
            TurnEvent::Started { .. } | TurnEvent::ModelDone { .. } => {}
            TurnEvent::Content { text } => self.text(&mut p.out, text, false),
            TurnEvent::Reasoning { text } if self.show_reasoning => {
                self.text(&mut p.out, text, true);
            }
            TurnEvent::Reasoning { .. } => {}
            TurnEvent::Retry {
                attempt,
                delay_ms,
                error,
            } => {
                p.err = format!(
                    "boxctl: model call failed (attempt {attempt}): {}; retrying in {delay_ms} ms\n",
                    one_line(error, None)
                );
            }
            TurnEvent::ToolCall { tool_call, .. } => {
                self.break_line(&mut p.out);
                p.out.push_str(&tool_call_line(tool_call));
                p.out.push('\n');
            }
            TurnEvent::ToolResult {
                outcome,
                truncated,
                untrusted,
                bytes,
                ..
            } => {
                self.break_line(&mut p.out);
                p.out
                    .push_str(&tool_result_line(outcome, *bytes, *truncated, *untrusted));
                p.out.push('\n');
            }
            TurnEvent::ApprovalRequested {
                approval,
                tool,
                arguments,
                reason,
                timeout_ms,
                ..
            } => {
                self.break_line(&mut p.out);
                p.out.push_str(&approval_request_text(
                    approval,
                    tool,
                    arguments,
                    reason,
                    *timeout_ms,
                ));
            }
            TurnEvent::ApprovalDecided {
                approval, decision, ..
            } => {
                self.break_line(&mut p.out);
                p.out.push_str(&approval_decided_line(approval, *decision));
                p.out.push('\n');
            }
            TurnEvent::Ended { end, .. } => {
                self.break_line(&mut p.out);
                if let Some(why) = end_message(end) {
                    p.err = format!("boxctl: {why}\n");
                }
            }
            TurnEvent::Subagent { .. } => {
                if let Some(line) = nested_line(event, 0) {
                    self.break_line(&mut p.out);
                    p.out.push_str(&line);
                    p.out.push('\n');
                }
            }
        }
        p
    }

    /// What is left to print when the stream stops without `Ended`.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.break_line(&mut out);
        out
    }
}

/// Labels as words: `private`, `public, untrusted`.
pub fn label_words(class: DataClass, untrusted: bool) -> String {
    let class = serde_json::to_value(class)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{class:?}"));
    if untrusted {
        format!("{class}, untrusted")
    } else {
        class
    }
}

/// A subagent's event as one indented line (two spaces a level), naming the child session;
/// only its tool calls, tool results, approvals and end are shown: its answer comes back as the
/// parent's tool result.
fn nested_line(event: &TurnEvent, depth: usize) -> Option<String> {
    let indent = "  ".repeat(depth);
    match event {
        TurnEvent::Subagent { session, event } => {
            let inner = nested_line(event, depth + 1)?;
            Some(if matches!(**event, TurnEvent::Subagent { .. }) {
                inner
            } else {
                format!("  {indent}[{session}] {}", inner.trim_start())
            })
        }
        TurnEvent::ToolCall { tool_call, .. } => Some(tool_call_line(tool_call)),
        TurnEvent::ToolResult {
            outcome,
            truncated,
            untrusted,
            bytes,
            ..
        } => Some(tool_result_line(outcome, *bytes, *truncated, *untrusted)),
        TurnEvent::Ended { end, .. } => {
            Some(child_end_message(end).unwrap_or_else(|| "the subagent is done".into()))
        }
        TurnEvent::ApprovalRequested {
            approval,
            tool,
            arguments,
            reason,
            ..
        } => Some(format!(
            "? approval {}: {} {} ({}); boxctl approve|deny {0}",
            terminal_safe(approval.as_str()),
            in_full(tool),
            in_full(arguments),
            in_full(reason)
        )),
        TurnEvent::ApprovalDecided {
            approval, decision, ..
        } => Some(approval_decided_line(approval, *decision)),
        _ => None,
    }
}

/// `seconds` as `1d 2h`, `3h 4m`, `5m 6s` or `7s`.
pub fn duration_words(seconds: u64) -> String {
    let (d, h, m, s) = (
        seconds / 86_400,
        seconds % 86_400 / 3_600,
        seconds % 3_600 / 60,
        seconds % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}
