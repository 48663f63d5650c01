//! Reading a streamed chat answer: each `data:` event's JSON chunk becomes [`ChatEvent`]s and
//! is folded into the [`Completion`] (text, tool calls assembled from `index`-keyed
//! fragments, finish reason, usage, timings).

use std::collections::BTreeMap;

use bxcore::{ToolCall, Usage};
use serde::Deserialize;

use super::error::{ErrorObject, InferError};
use super::message::{ChatEvent, Completion, Timings};

/// The data of the event that ends a stream.
const DONE: &str = "[DONE]";
/// The finish reason assumed when the server sent none.
const DEFAULT_FINISH_REASON: &str = "stop";

#[derive(Debug, Default, Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    timings: Option<WireTimings>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

#[derive(Debug, Default, Deserialize)]
struct Choice {
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CallFragment>>,
}

#[derive(Debug, Default, Deserialize)]
struct CallFragment {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionFragment>,
}

#[derive(Debug, Default, Deserialize)]
struct FunctionFragment {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: u64,
}

#[derive(Debug, Default, Deserialize)]
struct WireTimings {
    #[serde(default)]
    cache_n: u64,
    #[serde(default)]
    prompt_n: u64,
    #[serde(default)]
    prompt_ms: f64,
    #[serde(default)]
    predicted_n: u64,
    #[serde(default)]
    predicted_ms: f64,
}

/// What one event did to the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// More is to come.
    More,
    /// `[DONE]` arrived: the answer is complete.
    Done,
}

/// The answer being assembled.
#[derive(Debug, Default)]
pub struct Assembler {
    content: String,
    reasoning: String,
    calls: BTreeMap<usize, ToolCall>,
    last_index: Option<usize>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    timings: Option<Timings>,
    streamed: bool,
}

impl Assembler {
    /// An empty answer.
    pub fn new() -> Assembler {
        Assembler::default()
    }

    /// Whether anything of the answer (text, reasoning, a tool call) has arrived: a retry
    /// would then duplicate output.
    pub fn has_streamed(&self) -> bool {
        self.streamed
    }

    /// Takes one `data:` event, reporting its text deltas to `on_event`.
    pub fn data<F>(&mut self, data: &str, on_event: &mut F) -> Result<Progress, InferError>
    where
        F: FnMut(&ChatEvent) + ?Sized,
    {
        if data.trim() == DONE {
            return Ok(Progress::Done);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|e| InferError::Stream {
            kind: None,
            message: format!("an event is not a chat chunk ({e})"),
        })?;
        if let Some(error) = chunk.error {
            return Err(stream_error(error));
        }
        for choice in chunk.choices.into_iter().flatten() {
            if let Some(delta) = choice.delta {
                self.delta(delta, on_event);
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason);
            }
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(Usage {
                prompt_tokens: u.prompt_tokens,
                completion_tokens: u.completion_tokens,
                cached_tokens: u.prompt_tokens_details.map_or(0, |d| d.cached_tokens),
            });
        }
        if let Some(t) = chunk.timings {
            self.timings = Some(Timings {
                cache_n: t.cache_n,
                prompt_n: t.prompt_n,
                prompt_ms: t.prompt_ms,
                predicted_n: t.predicted_n,
                predicted_ms: t.predicted_ms,
            });
        }
        Ok(Progress::More)
    }

    /// Takes an `error:` event (older llama-server builds).
    pub fn error_event(&self, value: &str) -> InferError {
        let object = serde_json::from_str::<super::error::ErrorDocument>(value)
            .map(|doc| doc.error)
            .or_else(|_| serde_json::from_str::<ErrorObject>(value));
        match object {
            Ok(error) => stream_error(error),
            Err(_) => InferError::Stream {
                kind: None,
                message: value.to_owned(),
            },
        }
    }

    fn delta<F>(&mut self, delta: Delta, on_event: &mut F)
    where
        F: FnMut(&ChatEvent) + ?Sized,
    {
        if let Some(text) = delta.reasoning_content.filter(|t| !t.is_empty()) {
            self.streamed = true;
            self.reasoning.push_str(&text);
            on_event(&ChatEvent::Reasoning(text));
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            self.streamed = true;
            self.content.push_str(&text);
            on_event(&ChatEvent::Content(text));
        }
        for fragment in delta.tool_calls.into_iter().flatten() {
            self.streamed = true;
            self.fragment(fragment);
        }
    }

    /// Folds one tool call fragment in: id and name from the first fragment that has them,
    /// arguments appended. A fragment without `index` continues the last call, or starts a
    /// new one when it brings a new id.
    fn fragment(&mut self, fragment: CallFragment) {
        let id = fragment.id.filter(|id| !id.is_empty());
        let index = match (fragment.index, self.last_index) {
            (Some(index), _) => index,
            (None, None) => 0,
            (None, Some(last)) => {
                let last_id = self.calls.get(&last).map_or("", |c| c.id.as_str());
                match &id {
                    Some(id) if !last_id.is_empty() && id != last_id => last + 1,
                    _ => last,
                }
            }
        };
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_insert_with(|| ToolCall {
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        });
        if let Some(id) = id.filter(|_| call.id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function
                .name
                .filter(|n| !n.is_empty() && call.name.is_empty())
            {
                call.name = name;
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    /// The complete answer, once `[DONE]` arrived.
    pub fn finish(self) -> Completion {
        let tool_calls: Vec<ToolCall> = self
            .calls
            .into_values()
            .enumerate()
            .map(|(i, mut call)| {
                if call.id.is_empty() {
                    call.id = format!("call_{i}");
                }
                call
            })
            .collect();
        let finish_reason = self.finish_reason.unwrap_or_else(|| {
            tracing::debug!("the stream ended without a finish reason");
            DEFAULT_FINISH_REASON.to_owned()
        });
        if self.usage.is_none() {
            tracing::debug!("the stream ended without usage");
        }
        Completion {
            content: Some(self.content).filter(|c| !c.is_empty()),
            reasoning: Some(self.reasoning).filter(|r| !r.is_empty()),
            tool_calls,
            finish_reason,
            usage: self.usage.unwrap_or_default(),
            timings: self.timings,
        }
    }
}

/// An error event in a stream: context overflow and 503 keep their kinds; anything else is
/// a [`InferError::Stream`] with the server's type and message.
fn stream_error(error: ErrorObject) -> InferError {
    match InferError::from_error_object(None, error) {
        InferError::Server { kind, message, .. } => InferError::Stream {
            kind: Some(kind).filter(|k| !k.is_empty()),
            message,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests;
