//! From a session to the messages of a model call: the epoch's baseline (system prompt,
//! memory, tools array), then the carry, then the epoch's records.
//!
//! The baseline is made once per epoch and stored (`session::Baseline`); every call of the
//! epoch starts with exactly its bytes, so llama-server's prompt cache covers it.

use crate::config::Config;
use crate::llama::ChatMessage;
use crate::session::{BASELINE_FORMAT_VERSION, Baseline, Session, StoreError};
use crate::tools::Registry;
use bxcore::{Labels, LogRecord, Timestamp, ToolCall};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// What the model is told about a call in an answer that was cut off.
pub const CUT_CALL: &str = "Not run: your answer was cut off at the token limit before this \
     tool call was complete. Call it again with shorter arguments.";

/// What the model sees in place of a result that never came (the turn was interrupted
/// between the call and its result). Chat templates need every call answered.
pub const MISSING_RESULT: &str = "No result: the turn ended before this tool call finished.";

/// Why a baseline could not be made.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The system prompt file could not be read.
    #[error("cannot read the system prompt {path}")]
    SystemPrompt {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Reads the system prompt file.
pub fn read_system_prompt(path: &Path) -> Result<String, BaselineError> {
    std::fs::read_to_string(path).map_err(|source| BaselineError::SystemPrompt {
        path: path.to_path_buf(),
        source,
    })
}

/// The current epoch's baseline, made from `system`, the memory notes `cfg` lets in
/// ([`crate::memory::for_baseline`]) and the registry's core tools, and written first if the
/// epoch has none yet. Memory that cannot be read is left out (and logged).
pub fn ensure<'s>(
    session: &'s mut Session,
    cfg: &Config,
    system: &str,
    registry: &Registry,
) -> Result<&'s Baseline, BaselineError> {
    if session.current_baseline().is_none() {
        let notes = crate::memory::list(cfg).unwrap_or_else(|e| {
            tracing::warn!(session = %session.id(), error = %e, "cannot read memory; the baseline has none");
            Vec::new()
        });
        let (memory, memory_labels) = crate::memory::for_baseline(cfg, &notes);
        let baseline = Baseline {
            version: BASELINE_FORMAT_VERSION,
            epoch: session.epoch(),
            time: Timestamp::now(),
            system: system.to_string(),
            memory,
            memory_labels,
            tools: registry.core_schemas(),
            tools_labels: registry.core_labels(),
        };
        session.write_baseline(baseline)?;
    }
    session
        .current_baseline()
        .ok_or_else(|| BaselineError::Store(StoreError::Poisoned(session.id().clone())))
}

/// The messages of the current epoch: baseline, carry, then its records.
pub fn messages(session: &Session, baseline: &Baseline) -> Vec<ChatMessage> {
    messages_with_carry(baseline, session.epoch_records(), session.carry())
}

/// The messages for `records` (one epoch's) after `baseline` and the carry. Tool summaries,
/// partial answers (a stopped turn's), turn ends and notes are not replayed; reasoning is not
/// sent back; an untrusted result is sent after its mark ([`crate::untrusted::mark`]). A call
/// that cannot be sent back as a call ([`replayed_as_call`]) is left out of its answer, and its
/// result reaches the model as a user message after the answer's other results.
pub fn messages_with_carry(
    baseline: &Baseline,
    records: &[LogRecord],
    carry: Option<(&str, Labels)>,
) -> Vec<ChatMessage> {
    let mut system = baseline.system.trim_end().to_string();
    if !baseline.memory.is_empty() {
        system.push_str("\n\n");
        system.push_str(&baseline.memory);
    }
    let mut out = vec![ChatMessage::System { content: system }];
    if let Some((carry, _)) = carry {
        out.push(ChatMessage::User {
            content: format!("Summary of the conversation so far:\n{carry}"),
        });
    }
    let cut = cut_call_ids(records);
    // Calls asked for and not yet answered, in order.
    let mut open_calls: Vec<String> = Vec::new();
    // The calls of the last answer that were not sent back as calls, by id: their names.
    let mut unsent: HashMap<&str, &str> = HashMap::new();
    // Their results, held back until the answer's other results are in.
    let mut held: Vec<String> = Vec::new();
    // Untrusted results are sent marked, naming their tool (`untrusted`).
    let tools = crate::untrusted::tools_of_calls(records);
    // Turns the owner undid are left out.
    for record in crate::undone::kept(records) {
        let answers_a_call = matches!(record, LogRecord::ToolResult { .. });
        let replayed = matches!(
            record,
            LogRecord::User { .. }
                | LogRecord::Overheard { .. }
                | LogRecord::Assistant { .. }
                | LogRecord::TurnEnd { .. }
        );
        if !answers_a_call && replayed {
            close_open_calls(&mut open_calls, &mut out);
            flush_held(&mut held, &mut out);
        }
        match record {
            LogRecord::User { content, .. } => out.push(ChatMessage::User {
                content: content.clone(),
            }),
            LogRecord::Overheard { from, content, .. } => out.push(ChatMessage::User {
                content: crate::untrusted::overheard(from, content),
            }),
            LogRecord::Assistant {
                content,
                tool_calls,
                ..
            } => {
                let (calls, left_out): (Vec<&ToolCall>, Vec<&ToolCall>) =
                    tool_calls.iter().partition(|c| replayed_as_call(c, &cut));
                open_calls = calls.iter().map(|c| c.id.clone()).collect();
                unsent = left_out
                    .iter()
                    .map(|c| (c.id.as_str(), c.name.as_str()))
                    .collect();
                out.push(ChatMessage::Assistant {
                    content: content.clone(),
                    tool_calls: calls.into_iter().cloned().collect(),
                });
            }
            LogRecord::ToolResult {
                tool_call_id,
                content,
                untrusted,
                ..
            } => {
                if let Some(name) = unsent.remove(tool_call_id.as_str()) {
                    let shown = crate::untrusted::shown(content, *untrusted, Some(name));
                    held.push(format!("Result of your call to {name}: {shown}"));
                    continue;
                }
                open_calls.retain(|id| id != tool_call_id);
                let tool = tools.get(tool_call_id.as_str()).map(String::as_str);
                out.push(ChatMessage::Tool {
                    tool_call_id: tool_call_id.clone(),
                    content: crate::untrusted::shown(content, *untrusted, tool),
                });
            }
            LogRecord::Header { .. }
            | LogRecord::EpochStart { .. }
            | LogRecord::Inherited { .. }
            | LogRecord::PartialAnswer { .. }
            | LogRecord::ToolSummary { .. }
            | LogRecord::TurnEnd { .. }
            | LogRecord::ApprovalRequested { .. }
            | LogRecord::ApprovalDecided { .. }
            | LogRecord::Baseline { .. }
            | LogRecord::Undone { .. }
            | LogRecord::Note { .. } => {}
        }
    }
    flush_held(&mut held, &mut out);
    out
}

/// Whether `call` goes back to the model as a tool call. Not when its arguments are not JSON:
/// a template with tool support parses every earlier call's arguments, and llama-server
/// refuses the whole request when one does not parse (500 "Failed to parse tool call
/// arguments as JSON"), so one such call would fail every later request of the epoch. Nor
/// when it was in an answer cut at the token limit (its id in `cut`): it was never run, and
/// it must not read as a finished call. Both hold for logs written before this rule, which
/// are healed when read.
fn replayed_as_call(call: &ToolCall, cut: &HashSet<&str>) -> bool {
    !cut.contains(call.id.as_str())
        && serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments).is_ok()
}

/// The ids of the calls answered with [`CUT_CALL`]: those of an answer cut at the token limit.
fn cut_call_ids(records: &[LogRecord]) -> HashSet<&str> {
    records
        .iter()
        .filter_map(|record| match record {
            LogRecord::ToolResult {
                tool_call_id,
                content,
                ..
            } if content == CUT_CALL => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect()
}

/// The held-back results of calls that were not sent back as calls, as one user message.
fn flush_held(held: &mut Vec<String>, out: &mut Vec<ChatMessage>) {
    if !held.is_empty() {
        out.push(ChatMessage::User {
            content: held.join("\n\n"),
        });
        held.clear();
    }
}

/// Answers every call still open with [`MISSING_RESULT`].
fn close_open_calls(open_calls: &mut Vec<String>, out: &mut Vec<ChatMessage>) {
    for tool_call_id in open_calls.drain(..) {
        out.push(ChatMessage::Tool {
            tool_call_id,
            content: MISSING_RESULT.to_string(),
        });
    }
}

/// The session's context label: the join of everything in its current epoch, the memory and
/// the tools array in its baseline, the carry, and what it inherited from the session that
/// started it included (SPEC 4).
pub fn context_labels(session: &Session) -> Labels {
    let mut labels = session.inherited();
    if let Some(baseline) = session.current_baseline() {
        labels = labels
            .join(baseline.memory_labels)
            .join(baseline.tools_labels);
    }
    labels.join(epoch_labels(session))
}

/// The join of the labels of the current epoch's carry and records: what a model call over
/// the epoch's messages reads besides its baseline.
pub fn epoch_labels(session: &Session) -> Labels {
    let mut labels = session.carry().map_or(Labels::PUBLIC, |(_, carry)| carry);
    for record in session.epoch_records() {
        if let LogRecord::ToolResult {
            class, untrusted, ..
        }
        | LogRecord::ToolSummary {
            class, untrusted, ..
        }
        | LogRecord::Overheard {
            class, untrusted, ..
        } = record
        {
            labels = labels.join(Labels::new(*class, *untrusted));
        }
    }
    labels
}

/// The names in a baseline's tools array.
pub fn tool_names(baseline: &Baseline) -> HashSet<&str> {
    baseline.tools.iter().map(|t| t.name.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bxcore::{CallId, DataClass, ToolOutcome, TurnEnd};

    fn baseline() -> Baseline {
        Baseline {
            version: BASELINE_FORMAT_VERSION,
            epoch: 1,
            time: Timestamp::now(),
            system: "System.\n".into(),
            memory: "Memory.".into(),
            memory_labels: Labels::PUBLIC,
            tools: vec![],
            tools_labels: Labels::PUBLIC,
        }
    }

    #[test]
    fn calls_left_without_a_result_are_answered_and_summaries_are_not_replayed() {
        let time = Timestamp::now();
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "clock".into(),
            arguments: "{}".into(),
        };
        let records = vec![
            LogRecord::User {
                time,
                turn: 1,
                content: "q".into(),
                task_id: None,
            },
            LogRecord::Assistant {
                time,
                content: String::new(),
                reasoning: Some("never replayed".into()),
                tool_calls: vec![call("a"), call("b")],
                usage: None,
            },
            LogRecord::ToolResult {
                time,
                call: CallId(1),
                tool_call_id: "a".into(),
                content: "A".into(),
                class: DataClass::Public,
                untrusted: false,
                truncated: false,
                outcome: ToolOutcome::Ok,
                by_loopd: false,
            },
            LogRecord::ToolSummary {
                time,
                call: CallId(1),
                tool_call_id: "a".into(),
                content: "summary".into(),
                class: DataClass::Public,
                untrusted: false,
            },
            LogRecord::TurnEnd {
                time,
                turn: 1,
                end: TurnEnd::Interrupted,
            },
        ];
        let messages = messages_with_carry(
            &baseline(),
            &records,
            Some(("so far", Labels::new(DataClass::Private, false))),
        );
        assert_eq!(
            messages[0],
            ChatMessage::System {
                content: "System.\n\nMemory.".into()
            }
        );
        assert!(
            matches!(&messages[1], ChatMessage::User { content } if content.ends_with("so far"))
        );
        let tool_answers: Vec<(&str, &str)> = messages
            .iter()
            .filter_map(|m| match m {
                ChatMessage::Tool {
                    tool_call_id,
                    content,
                } => Some((tool_call_id.as_str(), content.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(tool_answers, [("a", "A"), ("b", MISSING_RESULT)]);
        assert_eq!(messages.len(), 6);
    }

    #[test]
    fn an_untrusted_result_is_sent_marked_with_its_tool_and_a_trusted_one_as_it_came() {
        let time = Timestamp::now();
        let result = |id: &str, untrusted: bool| LogRecord::ToolResult {
            time,
            call: CallId(1),
            tool_call_id: id.into(),
            content: "RESULT".into(),
            class: DataClass::Public,
            untrusted,
            truncated: false,
            outcome: ToolOutcome::Ok,
            by_loopd: false,
        };
        let records = vec![
            LogRecord::Assistant {
                time,
                content: String::new(),
                reasoning: None,
                tool_calls: vec![
                    ToolCall {
                        id: "page".into(),
                        name: "call_tool".into(),
                        arguments: r#"{"name":"http_fetch","arguments":{"url":"x"}}"#.into(),
                    },
                    ToolCall {
                        id: "file".into(),
                        name: "read_file".into(),
                        arguments: "{}".into(),
                    },
                ],
                usage: None,
            },
            result("page", true),
            result("file", false),
        ];
        let tool_answers: Vec<String> = messages_with_carry(&baseline(), &records, None)
            .into_iter()
            .filter_map(|m| match m {
                ChatMessage::Tool { content, .. } => Some(content),
                _ => None,
            })
            .collect();
        assert_eq!(
            tool_answers,
            [
                format!("{}RESULT", crate::untrusted::mark(Some("http_fetch"))),
                "RESULT".to_string()
            ]
        );
        assert!(tool_answers[0].starts_with("[untrusted http_fetch result:"));
    }
}
