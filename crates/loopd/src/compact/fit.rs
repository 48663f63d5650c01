//! Sizing a compaction's request before it is sent, from measured token counts, so that the
//! answer has room in the slot (issue 12: a request of 4 070 tokens to a 4 096-token slot
//! left 26 tokens for the summary).
//!
//! The system prompt and the compaction prompt are kept whole. The other messages are cut to
//! one common length (the longest that fits: short messages stay whole, long tool outputs are
//! cut), each cut marked; when even messages cut to nothing would take more than
//! [`FIT_MAX_BARE_PERCENT`] of the budget, the oldest records are left out first, in whole
//! steps (a tool result never loses its call), and a note says how many. Each try is measured
//! (`measure`: the server's own count); the next length comes from the last measurement.

use crate::llama::ChatMessage;

/// What a cut message ends with.
pub const CUT_MARK: &str = "[cut for compaction]";
/// The most measurements one fitting takes; past them the request is said not to fit.
pub const FIT_MAX_MEASUREMENTS: usize = 12;
/// The share (percent) of the room for content aimed at, so that a slightly wrong estimate
/// of tokens per character still fits at the next measurement.
pub const FIT_TARGET_PERCENT: usize = 90;
/// The most of the budget (percent) the messages may take when cut to nothing: past it, the
/// oldest records are left out, so that what is kept has room for some of its text.
pub const FIT_MAX_BARE_PERCENT: u64 = 50;

/// The parts of a compaction request, in the order sent.
#[derive(Debug, Clone)]
pub struct Parts {
    /// The system prompt: kept whole.
    pub system: ChatMessage,
    /// The carry and a re-stated request: cut like the records, never left out.
    pub head: Vec<ChatMessage>,
    /// The epoch's records: cut, and the oldest left out when they must be.
    pub records: Vec<ChatMessage>,
    /// The compaction prompt: kept whole, last.
    pub prompt: ChatMessage,
}

/// Why the request cannot be made to fit.
#[derive(Debug, thiserror::Error)]
pub enum FitError<E> {
    /// Measuring failed.
    #[error("cannot measure the compaction request: {0}")]
    Measure(E),
    /// Even the system prompt, the compaction prompt and every message cut to nothing take
    /// more than the budget, or the measurements ran out.
    #[error("the compaction request does not fit: {tokens} tokens at the least, {budget} allowed")]
    TooBig {
        /// The smallest request measured.
        tokens: u32,
        /// The budget.
        budget: u32,
    },
}

/// `parts` cut until their measured tokens are at most `budget`: the messages to send.
pub fn fit<E>(
    parts: &Parts,
    budget: u32,
    measure: &mut dyn FnMut(&[ChatMessage]) -> Result<u32, E>,
) -> Result<Vec<ChatMessage>, FitError<E>> {
    let mut count = |messages: &[ChatMessage]| measure(messages).map_err(FitError::Measure);
    let whole = assemble(parts, &parts.head, &parts.records, 0);
    let whole_tokens = count(&whole)?;
    if whole_tokens <= budget {
        return Ok(whole);
    }
    // What the messages cost cut to nothing, leaving out the oldest records until that is at
    // most half the budget.
    let mut skip = 0;
    let mut bare_tokens;
    let mut first_bare = None;
    loop {
        let bare = assemble(
            parts,
            &cut_all(&parts.head, 0),
            &cut_all(&parts.records[skip..], 0),
            skip,
        );
        bare_tokens = count(&bare)?;
        first_bare.get_or_insert(bare_tokens);
        let left = parts.records.len() - skip;
        if u64::from(bare_tokens) * 100 <= u64::from(budget) * FIT_MAX_BARE_PERCENT || left == 0 {
            break;
        }
        skip = step_start(&parts.records, skip + left.div_ceil(2));
    }
    if bare_tokens > budget {
        return Err(FitError::TooBig {
            tokens: bare_tokens,
            budget,
        });
    }
    // Tokens per character of the text that can be cut, from the whole and the bare counts.
    let lengths: Vec<usize> = parts
        .head
        .iter()
        .chain(&parts.records[skip..])
        .map(text_chars)
        .collect();
    let all_chars: usize = parts
        .head
        .iter()
        .chain(&parts.records)
        .map(text_chars)
        .sum();
    let text_tokens = whole_tokens.saturating_sub(first_bare.unwrap_or(bare_tokens));
    let chars_per_token = all_chars as f64 / f64::from(text_tokens.max(1));
    let mut allowed_chars =
        f64::from(budget - bare_tokens) * chars_per_token * FIT_TARGET_PERCENT as f64 / 100.0;
    let mut smallest = bare_tokens;
    for _ in 0..FIT_MAX_MEASUREMENTS {
        let cap = water_level(&lengths, allowed_chars as usize);
        let messages = assemble(
            parts,
            &cut_all(&parts.head, cap),
            &cut_all(&parts.records[skip..], cap),
            skip,
        );
        let tokens = count(&messages)?;
        if tokens <= budget {
            return Ok(messages);
        }
        smallest = smallest.min(tokens);
        // Too big by this much: aim lower in proportion to the overshoot.
        let room = f64::from(budget - bare_tokens);
        let used = f64::from(tokens - bare_tokens);
        allowed_chars = allowed_chars * room / used * FIT_TARGET_PERCENT as f64 / 100.0;
    }
    Err(FitError::TooBig {
        tokens: smallest,
        budget,
    })
}

/// The request's messages: system, head, a note on the records left out (when `skip` > 0),
/// the kept records, the prompt.
fn assemble(
    parts: &Parts,
    head: &[ChatMessage],
    records: &[ChatMessage],
    skip: usize,
) -> Vec<ChatMessage> {
    let mut out = Vec::with_capacity(head.len() + records.len() + 3);
    out.push(parts.system.clone());
    out.extend_from_slice(head);
    if skip > 0 {
        out.push(ChatMessage::User {
            content: format!("[{skip} earlier messages were left out to fit the slot]"),
        });
    }
    out.extend_from_slice(records);
    out.push(parts.prompt.clone());
    out
}

/// The first index at or after `at` where a step starts (a message that is not a tool's
/// result), so that no result is kept without its call.
fn step_start(records: &[ChatMessage], at: usize) -> usize {
    let mut at = at.min(records.len());
    while records
        .get(at)
        .is_some_and(|m| matches!(m, ChatMessage::Tool { .. }))
    {
        at += 1;
    }
    at
}

/// The characters of a message that cutting can remove: its text and its calls' arguments.
fn text_chars(message: &ChatMessage) -> usize {
    match message {
        ChatMessage::System { content }
        | ChatMessage::User { content }
        | ChatMessage::Tool { content, .. } => content.chars().count(),
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => {
            content.chars().count()
                + tool_calls
                    .iter()
                    .map(|c| c.arguments.chars().count())
                    .sum::<usize>()
        }
    }
}

/// The largest length `cap` such that the lengths cut to `cap` add up to at most `allowed`.
fn water_level(lengths: &[usize], allowed: usize) -> usize {
    let mut sorted = lengths.to_vec();
    sorted.sort_unstable();
    let mut used = 0;
    for (i, &len) in sorted.iter().enumerate() {
        let rest = sorted.len() - i;
        if used + len * rest > allowed {
            return (allowed - used) / rest;
        }
        used += len;
    }
    sorted.last().copied().unwrap_or(0)
}

fn cut_all(messages: &[ChatMessage], max_chars: usize) -> Vec<ChatMessage> {
    messages.iter().map(|m| shrink(m, max_chars)).collect()
}

/// `message` with its text cut to `max_chars`, and each call's arguments longer than that
/// replaced by a JSON object saying how long they were (they must stay JSON: templates and
/// llama-server parse them).
pub fn shrink(message: &ChatMessage, max_chars: usize) -> ChatMessage {
    let cut = |text: &str| {
        let kept = crate::text::cap_chars(text, max_chars);
        if kept.len() < text.len() {
            format!("{kept} {CUT_MARK}")
        } else {
            kept
        }
    };
    match message {
        ChatMessage::System { .. } => message.clone(),
        ChatMessage::User { content } => ChatMessage::User {
            content: cut(content),
        },
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => ChatMessage::Assistant {
            content: cut(content),
            tool_calls: tool_calls
                .iter()
                .map(|call| {
                    let mut call = call.clone();
                    let chars = call.arguments.chars().count();
                    if chars > max_chars {
                        call.arguments = format!("{{\"cut_for_compaction_chars\": {chars}}}");
                    }
                    call
                })
                .collect(),
        },
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => ChatMessage::Tool {
            tool_call_id: tool_call_id.clone(),
            content: cut(content),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bxcore::ToolCall;

    /// A stand-in tokeniser: a token per 4 characters of text, 5 per message.
    fn tokens(messages: &[ChatMessage]) -> Result<u32, ()> {
        Ok(messages
            .iter()
            .map(|m| 5 + text_chars(m).div_ceil(4) as u32)
            .sum())
    }

    fn user(text: &str) -> ChatMessage {
        ChatMessage::User {
            content: text.into(),
        }
    }

    fn parts(records: Vec<ChatMessage>) -> Parts {
        Parts {
            system: ChatMessage::System {
                content: "system ".repeat(20),
            },
            head: vec![user("Summary so far: otters.")],
            records,
            prompt: user("Summarise."),
        }
    }

    #[test]
    fn what_fits_is_sent_whole() {
        let parts = parts(vec![user("short")]);
        let sent = fit(&parts, 1_000, &mut tokens).unwrap();
        assert_eq!(sent.len(), 4);
        assert_eq!(sent[2], user("short"));
    }

    #[test]
    fn long_messages_are_cut_to_fit_and_short_ones_stay_whole() {
        let parts = parts(vec![
            user("short one"),
            user(&"long tool output ".repeat(200)),
            user("short two"),
        ]);
        let budget = 400;
        let sent = fit(&parts, budget, &mut tokens).unwrap();
        let used = tokens(&sent).unwrap();
        assert!(used <= budget, "{used}");
        assert!(used > budget / 2, "most of the room is used: {used}");
        assert_eq!(sent[2], user("short one"));
        assert_eq!(sent[4], user("short two"));
        let ChatMessage::User { content } = &sent[3] else {
            panic!("{sent:?}")
        };
        assert!(content.ends_with(CUT_MARK), "{content}");
        assert_eq!(sent.last(), Some(&user("Summarise.")));
    }

    #[test]
    fn too_many_messages_leave_the_oldest_out_in_whole_steps() {
        let mut records = Vec::new();
        for i in 0..100 {
            records.push(ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: format!("c{i}"),
                    name: "list_dir".into(),
                    arguments: "{}".into(),
                }],
            });
            records.push(ChatMessage::Tool {
                tool_call_id: format!("c{i}"),
                content: format!("result {i}"),
            });
        }
        let sent = fit(&parts(records), 300, &mut tokens).unwrap();
        assert!(tokens(&sent).unwrap() <= 300);
        let ChatMessage::User { content } = &sent[2] else {
            panic!("{sent:?}")
        };
        assert!(
            content.contains("earlier messages were left out"),
            "{content}"
        );
        assert!(
            matches!(sent[3], ChatMessage::Assistant { .. }),
            "a kept step starts with its call"
        );
        let ChatMessage::Tool { content, .. } = &sent[sent.len() - 2] else {
            panic!("{sent:?}")
        };
        assert_eq!(content, "result 99", "the newest are kept");
    }

    #[test]
    fn a_budget_below_the_fixed_parts_is_too_big() {
        let result = fit(&parts(vec![user("x")]), 10, &mut tokens);
        assert!(
            matches!(result, Err(FitError::TooBig { budget: 10, .. })),
            "{result:?}"
        );
    }

    #[test]
    fn long_arguments_become_a_json_note() {
        let call = ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "write_file".into(),
                arguments: format!("{{\"text\": \"{}\"}}", "x".repeat(100)),
            }],
        };
        let ChatMessage::Assistant { tool_calls, .. } = shrink(&call, 10) else {
            unreachable!()
        };
        let args: serde_json::Value = serde_json::from_str(&tool_calls[0].arguments).unwrap();
        assert_eq!(args["cut_for_compaction_chars"], 112);
    }

    #[test]
    fn the_water_level_keeps_short_lengths_whole() {
        assert_eq!(water_level(&[10, 100, 1000], 10_000), 1000);
        assert_eq!(water_level(&[10, 100, 1000], 210), 100);
        assert_eq!(water_level(&[10, 100, 1000], 100), 45);
        assert_eq!(water_level(&[], 5), 0);
    }
}
