//! The answer to one chat request: what the "model" generates, cut to the token budget,
//! and the deltas a stream sends for it.

use crate::script::Rule;
use crate::template::{Piece, ToolCallText, assistant_pieces, tool_call_json_text};
use crate::tokenize::tokenize;

/// Why generation stopped, as `finish_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// The reply ended by itself.
    Stop,
    /// The reply ended with tool calls.
    ToolCalls,
    /// The token budget (`max_tokens` or the context) ran out.
    Length,
}

impl FinishReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::Length => "length",
        }
    }
}

/// A tool call returned to the client.
#[derive(Debug, Clone, PartialEq)]
pub struct OutCall {
    /// The generated call id.
    pub id: String,
    /// The function name.
    pub name: String,
    /// The raw arguments text.
    pub arguments: String,
}

/// The end-of-turn token the "model" generates after a reply that ends by itself. It counts
/// as one completion token (as llama-server's `<|im_end|>` does) and, being the last token
/// generated, is never evaluated, so never cached.
pub const END_OF_TURN: &str = "<|im_end|>";

/// One streamed delta, in generation order.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// A piece of `reasoning_content`.
    Reasoning(String),
    /// A piece of `content`.
    Content(String),
    /// The start of tool call `index`: its id and name with the first fragment of its
    /// arguments (empty when it has none).
    CallStart(usize, String),
    /// A later fragment of tool call `index`'s arguments.
    CallArguments(usize, String),
}

/// What fakellama generates for one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The reasoning sent (empty: none).
    pub reasoning: String,
    /// The content of the non-streamed answer. A tool call cut before its name is complete
    /// is in it as the raw text generated (and never streamed).
    pub content: String,
    /// The tool calls; the last one's arguments may be cut by the token budget.
    pub tool_calls: Vec<OutCall>,
    /// Why generation stopped.
    pub finish: FinishReason,
    /// The generated tokens, [`END_OF_TURN`] last unless the budget ran out.
    pub generated: Vec<String>,
    /// The stream's deltas.
    pub deltas: Vec<Delta>,
}

/// What the reply is made of before the token budget applies.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReplySource {
    /// The reasoning to send.
    pub reasoning: String,
    /// The content.
    pub content: String,
    /// The tool calls (sent as `tool_calls` only when `parse_tool_calls`).
    pub tool_calls: Vec<ToolCallText>,
}

impl ReplySource {
    /// The reply of a rule (or the default reply without one).
    ///
    /// A rule that gives no reply, reasoning or tool calls answers the default reply.
    /// Reasoning is dropped when thinking is disabled.
    pub fn new(rule: Option<&Rule>, default_reply: &str, enable_thinking: bool) -> Self {
        let Some(rule) = rule.filter(|r| {
            r.reply.is_some()
                || r.reasoning.is_some()
                || !r.tool_calls.is_empty()
                || r.error_mid_stream.is_some()
        }) else {
            return Self {
                content: default_reply.to_owned(),
                ..Self::default()
            };
        };
        Self {
            reasoning: if enable_thinking {
                rule.reasoning.clone().unwrap_or_default()
            } else {
                String::new()
            },
            content: rule.reply.clone().unwrap_or_default(),
            tool_calls: rule
                .tool_calls
                .iter()
                .map(|c| ToolCallText {
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                })
                .collect(),
        }
    }
}

/// Cuts each piece's tokens so that all together fit in `budget`; also says whether any
/// was cut and how much budget is left.
fn cut_to_budget(pieces: &[Piece], budget: usize) -> (Vec<(&Piece, Vec<String>)>, bool, usize) {
    let mut left = budget;
    let mut truncated = false;
    let cut = pieces
        .iter()
        .map(|piece| {
            let mut tokens = tokenize(piece.text());
            if tokens.len() > left {
                tokens.truncate(left);
                truncated = true;
            }
            left -= tokens.len();
            (piece, tokens)
        })
        .collect();
    (cut, truncated, left)
}

impl Answer {
    /// Generates the answer within `budget` tokens, the end-of-turn token included. Without
    /// `parse_tool_calls` (no tools in the request, or a template without tool support)
    /// tool calls are appended to the content as their JSON text, one a line.
    ///
    /// `new_id` names each returned tool call. A call cut by the budget is returned with its
    /// arguments cut once its start (up to its arguments) was generated; cut earlier, its
    /// raw text goes into the non-streamed content and nothing of it is streamed.
    pub fn generate(
        source: ReplySource,
        parse_tool_calls: bool,
        budget: usize,
        mut new_id: impl FnMut() -> String,
    ) -> Self {
        let ReplySource {
            reasoning,
            mut content,
            mut tool_calls,
        } = source;
        if !parse_tool_calls && !tool_calls.is_empty() {
            let texts: Vec<String> = tool_calls.iter().map(tool_call_json_text).collect();
            if !content.is_empty() {
                content.push('\n');
            }
            content.push_str(&texts.join("\n"));
            tool_calls.clear();
        }
        let pieces = assistant_pieces(&reasoning, &content, &tool_calls);
        let (cut, mut truncated, left) = cut_to_budget(&pieces, budget);

        let mut answer = Answer {
            reasoning: String::new(),
            content: String::new(),
            tool_calls: Vec::new(),
            finish: FinishReason::Stop,
            generated: Vec::new(),
            deltas: Vec::new(),
        };
        for (piece, tokens) in cut {
            answer.add_piece(piece, &tokens, &tool_calls, &mut new_id);
            answer.generated.extend(tokens);
        }
        if !truncated {
            if left > 0 {
                answer.generated.push(END_OF_TURN.to_owned());
            } else {
                truncated = true;
            }
        }
        answer.finish = if truncated {
            FinishReason::Length
        } else if !answer.tool_calls.is_empty() {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        };
        answer
    }

    /// Adds what the client sees of one piece, generated as `tokens` (perhaps cut).
    fn add_piece(
        &mut self,
        piece: &Piece,
        tokens: &[String],
        calls: &[ToolCallText],
        new_id: &mut impl FnMut() -> String,
    ) {
        match piece {
            Piece::Reasoning(_) => {
                self.reasoning.push_str(&tokens.concat());
                self.deltas
                    .extend(tokens.iter().cloned().map(Delta::Reasoning));
            }
            Piece::Content(_) => {
                self.content.push_str(&tokens.concat());
                self.deltas
                    .extend(tokens.iter().cloned().map(Delta::Content));
            }
            Piece::CallStart(i, text) => {
                let generated = tokens.concat();
                if generated == *text {
                    self.tool_calls.push(OutCall {
                        id: new_id(),
                        name: calls.get(*i).map(|c| c.name.clone()).unwrap_or_default(),
                        arguments: String::new(),
                    });
                    self.deltas
                        .push(Delta::CallStart(self.tool_calls.len() - 1, String::new()));
                } else {
                    self.content.push_str(&generated);
                }
            }
            Piece::Arguments(..) => {
                let Some(index) = self.tool_calls.len().checked_sub(1) else {
                    return;
                };
                for token in tokens {
                    self.tool_calls[index].arguments.push_str(token);
                    match self.deltas.last_mut() {
                        Some(Delta::CallStart(i, first)) if *i == index && first.is_empty() => {
                            first.push_str(token);
                        }
                        _ => self.deltas.push(Delta::CallArguments(index, token.clone())),
                    }
                }
            }
            Piece::Markup(_) | Piece::CallEnd(..) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::count_tokens;

    /// Tokens of the reasoning "hmm" with its markup.
    const THINK_TOKENS: usize = 14;

    #[test]
    fn reasoning_markup_has_the_expected_length() {
        assert_eq!(count_tokens("<think>\nhmm\n</think>\n\n"), THINK_TOKENS);
    }

    fn source(content: &str, calls: &[(&str, &str)]) -> ReplySource {
        ReplySource {
            reasoning: "hmm".into(),
            content: content.into(),
            tool_calls: calls
                .iter()
                .map(|(n, a)| ToolCallText {
                    name: (*n).into(),
                    arguments: (*a).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn tool_calls_and_finish() {
        let a = Answer::generate(source("", &[("clock", "{}")]), true, 1000, || "id1".into());
        assert_eq!(a.finish, FinishReason::ToolCalls);
        assert_eq!(a.tool_calls.len(), 1);
        assert_eq!(a.reasoning, "hmm");
        assert!(a.deltas.contains(&Delta::CallStart(0, "{".into())));
        assert!(a.deltas.contains(&Delta::CallArguments(0, "}".into())));
        assert_eq!(a.generated.last().map(String::as_str), Some(END_OF_TURN));
    }

    #[test]
    fn without_tools_calls_become_content() {
        let a = Answer::generate(source("x", &[("clock", "{}")]), false, 1000, || "i".into());
        assert_eq!(a.content, "x\n{\"name\":\"clock\",\"arguments\":{}}");
        assert!(a.tool_calls.is_empty());
        assert_eq!(a.finish, FinishReason::Stop);
    }

    #[test]
    fn the_end_of_turn_token_needs_room_in_the_budget() {
        let reply = ReplySource {
            content: "one two".into(),
            ..ReplySource::default()
        };
        let a = Answer::generate(reply.clone(), true, 4, || "i".into());
        assert_eq!((a.finish, a.generated.len()), (FinishReason::Stop, 4));
        let a = Answer::generate(reply, true, 3, || "i".into());
        assert_eq!((a.finish, a.generated.len()), (FinishReason::Length, 3));
        assert_eq!(a.content, "one two");
    }

    #[test]
    fn a_call_cut_in_its_arguments_is_returned_cut() {
        let start = THINK_TOKENS + count_tokens("<tool_call>\n{\"name\":\"clock\",\"arguments\":");
        let calls = [("clock", "{\"tz\":\"UTC\"}")];
        let a = Answer::generate(source("", &calls), true, start + 2, || "i".into());
        assert_eq!(a.finish, FinishReason::Length);
        assert_eq!(a.tool_calls[0].arguments, "{\"");
        assert!(a.deltas.contains(&Delta::CallStart(0, "{".into())));
        assert_eq!(a.deltas.last(), Some(&Delta::CallArguments(0, "\"".into())));
    }

    #[test]
    fn a_call_cut_in_its_name_is_raw_content_and_not_streamed() {
        let budget = THINK_TOKENS + 5;
        let a = Answer::generate(source("", &[("clock", "{}")]), true, budget, || "i".into());
        assert_eq!(a.finish, FinishReason::Length);
        assert!(a.tool_calls.is_empty());
        assert_eq!(a.content, "<tool_call>");
        assert!(a.deltas.iter().all(|d| matches!(d, Delta::Reasoning(_))));
        assert_eq!(a.generated.len(), budget);
    }
}
