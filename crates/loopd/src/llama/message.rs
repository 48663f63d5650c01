//! What loopd sends to llama-server and what comes back.

use bxcore::{ToolCall, Usage};
use proto::ToolSchema;

/// One message of a chat, in the order sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatMessage {
    /// The system prompt (and memory).
    System {
        /// The text.
        content: String,
    },
    /// A user message (or the carry of earlier epochs).
    User {
        /// The text.
        content: String,
    },
    /// An earlier answer of the model.
    Assistant {
        /// Its visible text.
        content: String,
        /// Its tool calls, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool's result.
    Tool {
        /// The id of the tool call it answers.
        tool_call_id: String,
        /// The result as the model sees it.
        content: String,
    },
}

/// One chat completion request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The slot (`id_slot`) to run on.
    pub slot: u32,
    /// The messages.
    pub messages: Vec<ChatMessage>,
    /// The tools array; empty: the `tools` key is left out.
    pub tools: Vec<ToolSchema>,
    /// `chat_template_kwargs.enable_thinking`.
    pub thinking: bool,
    /// Texts the model may not write, each sent as `logit_bias` `[text, false]` (llama-server
    /// bans the text's tokens); empty: no `logit_bias` key.
    pub banned: Vec<String>,
}

/// What the client reports while a request runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatEvent {
    /// A try failed in a way that is retried; the next one starts after `delay_ms`.
    Attempt {
        /// Which try failed, from 1.
        attempt: u32,
        /// The wait before the next try.
        delay_ms: u64,
        /// What went wrong.
        error: String,
    },
    /// A piece of the visible answer.
    Content(String),
    /// A piece of the reasoning.
    Reasoning(String),
}

/// llama-server's timings of one request.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Timings {
    /// Prompt tokens reused from the slot's cache.
    pub cache_n: u64,
    /// Prompt tokens evaluated.
    pub prompt_n: u64,
    /// Prompt evaluation time.
    pub prompt_ms: f64,
    /// Tokens generated.
    pub predicted_n: u64,
    /// Generation time.
    pub predicted_ms: f64,
}

impl From<Timings> for bxcore::ModelTimings {
    fn from(t: Timings) -> bxcore::ModelTimings {
        bxcore::ModelTimings {
            cache_n: t.cache_n,
            prompt_n: t.prompt_n,
            prompt_ms: t.prompt_ms,
            predicted_n: t.predicted_n,
            predicted_ms: t.predicted_ms,
        }
    }
}

/// A finished answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The visible text; `None` when empty.
    pub content: Option<String>,
    /// The reasoning text; `None` when empty.
    pub reasoning: Option<String>,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// `stop`, `tool_calls` or `length`.
    pub finish_reason: String,
    /// Token counts.
    pub usage: Usage,
    /// Timings, when the server sent them.
    pub timings: Option<Timings>,
}
