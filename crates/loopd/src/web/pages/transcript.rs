//! One session as a readable transcript: the owner's tasks, the answers, each tool call and
//! its result folded, every labelled text with its badges; live while a turn runs.

use super::{badges, layout, pretty_json, shown, task_form};
use bxcore::{LogRecord, ToolOutcome, TurnEnd};
use maud::{Markup, html};
use proto::api::{RecordsPage, SessionInfo};

/// `/sessions/ID`: the records of `page`, the session's state from `info`, and the form for
/// its next task.
pub fn session(csrf: &str, page: &RecordsPage, info: Option<&SessionInfo>) -> Markup {
    let id = page.session.as_str();
    let state = match info {
        Some(s) if s.busy => "a turn is running",
        Some(_) => "idle",
        None => "",
    };
    layout(
        id,
        "session",
        Some(csrf),
        html! {
            p.muted #session-state { (state) }
            @if page.from > 0 {
                p { a href={ "/sessions/" (id) "?from=0" } { "From the start" } }
            }
            ol #transcript start=(page.from + 1) {
                @for record in &page.records { (record_item(id, record)) }
            }
            @if let Some(next) = page.next {
                p { a #later href={ "/sessions/" (id) "?from=" (next) } { "Later records" } }
            }
            div #live data-session=(id) hidden {
                h2 { "Now" }
                pre #live-text {}
                div #live-events {}
            }
            h2 { "Next task" }
            (task_form(csrf, Some(id)))
        },
    )
}

fn outcome_text(outcome: &ToolOutcome) -> String {
    match outcome {
        ToolOutcome::Ok => "ok".into(),
        ToolOutcome::Failed => "failed".into(),
        ToolOutcome::Denied { reason } => format!(
            "denied ({})",
            serde_json::to_value(reason)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default()
        ),
        ToolOutcome::Redirected => "redirected".into(),
    }
}

fn end_text(end: &TurnEnd) -> String {
    match end {
        TurnEnd::Done => "done".into(),
        TurnEnd::Cancelled => "cancelled".into(),
        TurnEnd::Failed { reason } => format!("failed: {reason}"),
        TurnEnd::MaxSteps => "stopped at the step limit".into(),
        TurnEnd::Interrupted => "interrupted: loopd stopped while it ran".into(),
        TurnEnd::Budget { message, .. } => format!("stopped by a budget: {message}"),
    }
}

fn record_item(id: &str, record: &LogRecord) -> Markup {
    match record {
        LogRecord::Header { time, .. } => html! {
            li.record.note { span.who { "Session created" } span.muted { (time) } }
        },
        LogRecord::EpochStart {
            epoch,
            carry,
            class,
            untrusted,
            ..
        } => html! {
            li.record.epoch {
                details {
                    summary { span.who { "Epoch " (epoch) } "what it carries over" (badges(*class, *untrusted)) }
                    pre { (carry) }
                }
            }
        },
        LogRecord::Inherited {
            parent,
            class,
            untrusted,
            ..
        } => html! {
            li.record.note { span.who { "Child of " (parent) } "its context:" (badges(*class, *untrusted)) }
        },
        LogRecord::Overheard {
            from,
            content,
            class,
            untrusted,
            ..
        } => html! {
            li.record.note {
                div.who { "Overheard from " (from) (badges(*class, *untrusted)) }
                pre.text { (content) }
            }
        },
        LogRecord::User { turn, content, .. } => html! {
            li.record.user { div.who { "You, turn " (turn) } pre.text { (content) } }
        },
        LogRecord::Assistant {
            content,
            reasoning,
            tool_calls,
            ..
        } => html! {
            li.record.answer {
                div.who { "Agent" }
                @if let Some(reasoning) = reasoning {
                    details.reasoning { summary { "reasoning" } pre { (reasoning) } }
                }
                @if !content.is_empty() { pre.text { (content) } }
                @for call in tool_calls {
                    details.tool-call {
                        summary { "calls " code { (call.name) } }
                        pre.arguments { (pretty_json(&call.arguments)) }
                    }
                }
            }
        },
        LogRecord::PartialAnswer { content, .. } => html! {
            li.record.answer { div.who { "Agent (stopped)" } pre.text { (content) } }
        },
        LogRecord::ToolResult {
            content,
            class,
            untrusted,
            truncated,
            outcome,
            ..
        } => html! {
            li.record.tool {
                details.tool-call.tool-result {
                    summary {
                        "result: " (outcome_text(outcome))
                        @if *truncated { " (cut)" }
                        (badges(*class, *untrusted))
                    }
                    pre.result { (content) }
                }
            }
        },
        LogRecord::ToolSummary {
            content,
            class,
            untrusted,
            ..
        } => html! {
            li.record.tool {
                details.tool-call {
                    summary { "summary of a result" (badges(*class, *untrusted)) }
                    pre { (content) }
                }
            }
        },
        LogRecord::TurnEnd { turn, end, .. } => html! {
            li.record.end {
                "Turn " (turn) " ended: " (end_text(end))
                span.turn-actions {
                    a.turn-diff href={ "/sessions/" (id) "/diff?turn=" (turn) } { "what it changed" }
                    a.turn-undo href={ "/sessions/" (id) "/undo?from=" (turn) } { "undo from here" }
                }
            }
        },
        LogRecord::ApprovalRequested {
            tool,
            arguments,
            reason,
            class,
            untrusted,
            ..
        } => html! {
            li.record.approval {
                details.tool-call {
                    summary { (shown(tool)) " asked for the owner's approval" (badges(*class, *untrusted)) }
                    p { (shown(reason)) }
                    pre.arguments { (shown(&pretty_json(arguments))) }
                }
            }
        },
        LogRecord::ApprovalDecided {
            decision, reason, ..
        } => html! {
            li.record.approval {
                "Owner's answer: " (decision)
                @if let Some(reason) = reason { " (" (reason) ")" }
            }
        },
        LogRecord::Baseline { epoch, .. } => html! {
            li.record.note { "Epoch " (epoch) "'s system prompt and tools" }
        },
        LogRecord::Undone {
            from_turn,
            to_turn,
            files,
            ..
        } => html! {
            li.record.note { "Turns " (from_turn) " to " (to_turn) " undone: " (files) " file(s) put back" }
        },
        LogRecord::Note { text, .. } => html! { li.record.note { (text) } },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use bxcore::{SessionId, Timestamp};

    #[test]
    fn each_ended_turn_links_to_what_it_changed_and_to_an_undo_from_it() {
        let page = RecordsPage {
            session: SessionId::new("s1").unwrap(),
            from: 0,
            records: vec![LogRecord::TurnEnd {
                time: Timestamp::parse("2026-01-02T03:04:05Z").unwrap(),
                turn: 3,
                end: TurnEnd::Done,
            }],
            next: None,
        };
        let html = session("token", &page, None).into_string();
        assert!(html.contains("href=\"/sessions/s1/diff?turn=3\""), "{html}");
        assert!(html.contains("href=\"/sessions/s1/undo?from=3\""), "{html}");
    }
}
