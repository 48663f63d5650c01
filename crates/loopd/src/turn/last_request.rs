//! The shape of the last word's request (see `last_word`): what the small default model needs
//! to answer from the results it has instead of writing another call or a non-answer.
//!
//! Measured on Qwen2.5-Coder-0.5B with the captured requests of the suite's read, fetch and
//! attack tasks (`docs/evals.md`, run 7): asked with the turn's repeated calls in view and a
//! bare "answer my request", it answered "The owner of the tool results is not running." or
//! wrote the call again as a ```json block. With the repeats left out, the owner's request
//! quoted in the instruction, and no code fence allowed, it answered from the result (the
//! stock count, the wifi name, the meeting room, the high water time).

use super::repeats::{Arguments, REPEAT_REFUSAL_START, target};
use crate::llama::ChatMessage;
use std::collections::HashMap;

/// What the model may not write in the last word: a model offered no tools writes its call
/// as text in a code fence (our Qwen template's call markup), which is no answer. Sent as
/// `logit_bias` `false`, which llama-server applies to the text's tokens.
pub const LAST_WORD_BANNED: &str = "```";

/// The most characters of the owner's request the instruction quotes; a longer one is cut
/// and ends in "…" (the request itself is still in the messages above).
pub const LAST_WORD_REQUEST_MAX_CHARS: usize = 1_000;

/// The instruction sent after the epoch's messages in the last word, quoting the owner's
/// request of the turn (`request`; none: the turn's request is not in the log, and the
/// instruction names no request).
pub fn instruction(request: Option<&str>) -> String {
    let ask = "Answer it now from the tool results above, in a few sentences; if part of it \
               could not be done, say which part.";
    match request.map(str::trim).filter(|r| !r.is_empty()) {
        Some(request) => {
            let quoted: String = if request.chars().count() > LAST_WORD_REQUEST_MAX_CHARS {
                let cut: String = request.chars().take(LAST_WORD_REQUEST_MAX_CHARS).collect();
                format!("{cut}…")
            } else {
                request.to_string()
            };
            format!("Stop calling tools. My request was: \"{quoted}\" {ask}")
        }
        None => super::last_word::LAST_WORD_INSTRUCTION.to_string(),
    }
}

/// `messages` without the current turn's repeated calls: an assistant message with no text
/// whose every call repeats an earlier call of the turn (same tool, same arguments) and whose
/// every result is the earlier one's again or loopd's refusal of the repeat is left out, with
/// its results. The turn starts after the last user message. A repeat whose result differs
/// (a page that changed, a file written between) stays: it says something new.
pub fn without_repeats(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    let turn_start = messages
        .iter()
        .rposition(|m| matches!(m, ChatMessage::User { .. }))
        .map_or(0, |at| at + 1);
    let results: HashMap<&str, &str> = messages[turn_start..]
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => Some((tool_call_id.as_str(), content.as_str())),
            _ => None,
        })
        .collect();
    // Each distinct call of the turn (compared as `loop.max_repeated_calls` compares them,
    // `call_tool` unwrapped) with its first result.
    let mut first: Vec<((String, Arguments), &str)> = Vec::new();
    let mut dropped_ids: Vec<String> = Vec::new();
    for message in &messages[turn_start..] {
        let ChatMessage::Assistant {
            content,
            tool_calls,
        } = message
        else {
            continue;
        };
        let result_of = |id: &str| results.get(id).copied().unwrap_or_default();
        let repeats = !tool_calls.is_empty()
            && content.trim().is_empty()
            && tool_calls.iter().all(|c| {
                first_result(&first, &target(c)).is_some_and(|earlier| {
                    let now = result_of(&c.id);
                    now == earlier || now.contains(REPEAT_REFUSAL_START)
                })
            });
        if repeats {
            dropped_ids.extend(tool_calls.iter().map(|c| c.id.clone()));
            continue;
        }
        for call in tool_calls {
            let key = target(call);
            if first_result(&first, &key).is_none() {
                first.push((key, result_of(&call.id)));
            }
        }
    }
    if dropped_ids.is_empty() {
        return messages;
    }
    messages
        .into_iter()
        .enumerate()
        .filter(|(at, m)| {
            *at < turn_start
                || match m {
                    ChatMessage::Assistant { tool_calls, .. } => {
                        tool_calls.is_empty()
                            || !tool_calls.iter().all(|c| dropped_ids.contains(&c.id))
                    }
                    ChatMessage::Tool { tool_call_id, .. } => !dropped_ids.contains(tool_call_id),
                    _ => true,
                }
        })
        .map(|(_, m)| m)
        .collect()
}

/// The first result recorded for the call `key` in `first`.
fn first_result<'a>(
    first: &[((String, Arguments), &'a str)],
    key: &(String, Arguments),
) -> Option<&'a str> {
    first.iter().find(|(k, _)| k == key).map(|(_, r)| *r)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use bxcore::ToolCall;

    fn user(text: &str) -> ChatMessage {
        ChatMessage::User {
            content: text.into(),
        }
    }

    fn call(id: &str, name: &str, arguments: &str) -> ChatMessage {
        ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.into(),
            }],
        }
    }

    fn result(id: &str, text: &str) -> ChatMessage {
        ChatMessage::Tool {
            tool_call_id: id.into(),
            content: text.into(),
        }
    }

    #[test]
    fn the_turns_repeats_with_the_same_result_or_a_refusal_are_left_out() {
        let refusal = format!("[untrusted echo result: …]\n{REPEAT_REFUSAL_START}read_file …");
        let messages = vec![
            user("earlier turn"),
            call("0", "read_file", r#"{"path":"/a"}"#),
            result("0", "A"),
            user("how many?"),
            call("1", "read_file", r#"{"path":"/a"}"#),
            result("1", "A"),
            // The same arguments, written otherwise: a repeat all the same.
            call("2", "read_file", r#"{ "path": "/a" }"#),
            result("2", "A"),
            call("3", "read_file", r#"{"path":"/a"}"#),
            result("3", &refusal),
        ];
        let kept = without_repeats(messages.clone());
        assert_eq!(kept, messages[..6].to_vec());
    }

    #[test]
    fn a_repeat_through_call_tool_is_the_same_call() {
        let messages = vec![
            user("read it"),
            call("1", "read_file", r#"{"path":"/a"}"#),
            result("1", "A"),
            call(
                "2",
                "call_tool",
                r#"{"name":"read_file","arguments":{"path":"/a"}}"#,
            ),
            result("2", "A"),
        ];
        assert_eq!(without_repeats(messages.clone()), messages[..3].to_vec());
    }

    #[test]
    fn a_repeat_with_a_new_result_or_with_words_and_earlier_turns_stay() {
        let messages = vec![
            call("0", "read_file", r#"{"path":"/a"}"#),
            result("0", "A"),
            user("again"),
            // Not a repeat within this turn: the first call was in the turn before.
            call("1", "read_file", r#"{"path":"/a"}"#),
            result("1", "A"),
            // The file changed between: a new result says something new.
            call("2", "read_file", r#"{"path":"/a"}"#),
            result("2", "B"),
            ChatMessage::Assistant {
                content: "Reading it once more.".into(),
                tool_calls: vec![ToolCall {
                    id: "3".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"/a"}"#.into(),
                }],
            },
            result("3", "A"),
        ];
        assert_eq!(without_repeats(messages.clone()), messages);
    }

    #[test]
    fn the_instruction_quotes_the_request_cut_at_its_limit() {
        let short = instruction(Some("  How many wing nuts?  "));
        assert!(
            short.starts_with(
                "Stop calling tools. My request was: \"How many wing nuts?\" Answer it now"
            ),
            "{short}"
        );
        let long = "x".repeat(LAST_WORD_REQUEST_MAX_CHARS + 5);
        let cut = instruction(Some(&long));
        assert!(cut.contains(&format!("\"{}…\"", "x".repeat(LAST_WORD_REQUEST_MAX_CHARS))));
        assert!(!cut.contains(&"x".repeat(LAST_WORD_REQUEST_MAX_CHARS + 1)));
        assert_eq!(instruction(None), super::super::LAST_WORD_INSTRUCTION);
        assert_eq!(instruction(Some(" ")), super::super::LAST_WORD_INSTRUCTION);
    }
}
