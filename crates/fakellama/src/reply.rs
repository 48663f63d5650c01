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

/// One streamed delta, in generation order.
#[derive(Debug, Clone, PartialEq)]
pub enum Delta {
    /// A piece of `reasoning_content`.
    Reasoning(String),
    /// A piece of `content`.
    Content(String),
    /// The start of tool call `index`: id and name, empty arguments.
    CallStart(usize),
    /// A fragment of tool call `index`'s arguments.
    CallArguments(usize, String),
}

/// What fakellama generates for one request.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The reasoning sent (empty: none).
    pub reasoning: String,
    /// The content sent.
    pub content: String,
    /// The complete tool calls.
    pub tool_calls: Vec<OutCall>,
    /// Why generation stopped.
    pub finish: FinishReason,
    /// The generated tokens (what the slot caches after the prompt).
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

impl Answer {
    /// Generates the answer within `budget` tokens. Without `parse_tool_calls` (no tools in
    /// the request) tool calls are appended to the content as their JSON text, one a line.
    /// `new_id` names each returned tool call. A tool call cut by the budget is not returned.
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

        // Cut the pieces' tokens to the budget.
        let mut left = budget;
        let mut truncated = false;
        let cut: Vec<(&Piece, Vec<String>)> = pieces
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
        let complete: Vec<bool> = (0..tool_calls.len())
            .map(|i| {
                cut.iter().any(|(p, tokens)| {
                    matches!(p, Piece::CallEnd(j, text) if *j == i && tokens.concat() == *text)
                })
            })
            .collect();
        let is_complete = |i: &usize| complete.get(*i).copied().unwrap_or(false);

        let mut answer = Answer {
            reasoning: String::new(),
            content: String::new(),
            tool_calls: Vec::new(),
            finish: FinishReason::Stop,
            generated: Vec::new(),
            deltas: Vec::new(),
        };
        for (piece, tokens) in cut {
            match piece {
                Piece::Reasoning(_) => {
                    answer.reasoning.push_str(&tokens.concat());
                    answer
                        .deltas
                        .extend(tokens.iter().cloned().map(Delta::Reasoning));
                }
                Piece::Content(_) => {
                    answer.content.push_str(&tokens.concat());
                    answer
                        .deltas
                        .extend(tokens.iter().cloned().map(Delta::Content));
                }
                Piece::CallStart(i, _) if is_complete(i) => {
                    answer.tool_calls.push(OutCall {
                        id: new_id(),
                        name: tool_calls[*i].name.clone(),
                        arguments: tool_calls[*i].arguments.clone(),
                    });
                    answer
                        .deltas
                        .push(Delta::CallStart(answer.tool_calls.len() - 1));
                }
                Piece::Arguments(i, _) if is_complete(i) => {
                    let index = answer.tool_calls.len().saturating_sub(1);
                    answer.deltas.extend(
                        tokens
                            .iter()
                            .map(|t| Delta::CallArguments(index, t.clone())),
                    );
                }
                _ => {}
            }
            answer.generated.extend(tokens);
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(a.deltas.contains(&Delta::CallArguments(0, "{".into())));
    }

    #[test]
    fn without_tools_calls_become_content() {
        let a = Answer::generate(source("x", &[("clock", "{}")]), false, 1000, || "i".into());
        assert_eq!(a.content, "x\n{\"name\":\"clock\",\"arguments\":{}}");
        assert!(a.tool_calls.is_empty());
        assert_eq!(a.finish, FinishReason::Stop);
    }

    #[test]
    fn budget_cuts_and_drops_incomplete_calls() {
        let a = Answer::generate(source("one two three", &[("clock", "{}")]), true, 7, || {
            "i".into()
        });
        assert_eq!(a.finish, FinishReason::Length);
        assert_eq!(a.generated.len(), 7);
        assert!(a.tool_calls.is_empty());
    }
}
