//! The JSON body of `POST /v1/chat/completions`: OpenAI's shape plus llama-server's fields.

use serde::Serialize;

use super::message::{ChatMessage, ChatRequest};
use proto::ToolSchema;

/// The `tool_choice` sent with a non-empty tools array.
const TOOL_CHOICE: &str = "auto";

#[derive(Serialize)]
struct Body<'a> {
    messages: Vec<Message<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    id_slot: u32,
    cache_prompt: bool,
    chat_template_kwargs: TemplateKwargs,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Tool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    /// `[text, false]` pairs: llama-server's form for "never these tokens".
    #[serde(skip_serializing_if = "Vec::is_empty")]
    logit_bias: Vec<(&'a str, bool)>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct TemplateKwargs {
    enable_thinking: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum Message<'a> {
    System {
        content: &'a str,
    },
    User {
        content: &'a str,
    },
    Assistant {
        content: &'a str,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<Call<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
struct Call<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CallFunction<'a>,
}

#[derive(Serialize)]
struct CallFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct Tool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: &'a ToolSchema,
}

fn message(m: &ChatMessage) -> Message<'_> {
    match m {
        ChatMessage::System { content } => Message::System { content },
        ChatMessage::User { content } => Message::User { content },
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => Message::Assistant {
            content,
            tool_calls: tool_calls
                .iter()
                .map(|c| Call {
                    id: &c.id,
                    kind: "function",
                    function: CallFunction {
                        name: &c.name,
                        arguments: &c.arguments,
                    },
                })
                .collect(),
        },
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => Message::Tool {
            tool_call_id,
            content,
        },
    }
}

/// The streamed request body for `request`, with `max_tokens` when set.
pub fn chat_body(request: &ChatRequest, max_tokens: Option<u32>) -> Result<Vec<u8>, String> {
    let tools: Vec<Tool<'_>> = request
        .tools
        .iter()
        .map(|function| Tool {
            kind: "function",
            function,
        })
        .collect();
    let body = Body {
        messages: request.messages.iter().map(message).collect(),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        id_slot: request.slot,
        cache_prompt: true,
        chat_template_kwargs: TemplateKwargs {
            enable_thinking: request.thinking,
        },
        tool_choice: (!tools.is_empty()).then_some(TOOL_CHOICE),
        tools,
        max_tokens,
        logit_bias: request.banned.iter().map(|t| (t.as_str(), false)).collect(),
    };
    serde_json::to_vec(&body).map_err(|e| format!("cannot encode the chat request: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use bxcore::ToolCall;
    use serde_json::{Value, json};

    fn body(request: &ChatRequest, max_tokens: Option<u32>) -> Value {
        serde_json::from_slice(&chat_body(request, max_tokens).unwrap()).unwrap()
    }

    #[test]
    fn llama_wire_body_without_tools() {
        let request = ChatRequest {
            slot: 2,
            messages: vec![
                ChatMessage::System {
                    content: "sys".into(),
                },
                ChatMessage::User {
                    content: "hi".into(),
                },
            ],
            tools: vec![],
            thinking: false,
            banned: Vec::new(),
        };
        assert_eq!(
            body(&request, None),
            json!({
                "messages":[{"role":"system","content":"sys"},{"role":"user","content":"hi"}],
                "stream":true,"stream_options":{"include_usage":true},
                "id_slot":2,"cache_prompt":true,
                "chat_template_kwargs":{"enable_thinking":false},
            })
        );
    }

    #[test]
    fn llama_wire_body_with_tools_and_tool_messages() {
        let request = ChatRequest {
            slot: 0,
            messages: vec![
                ChatMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "clock".into(),
                        arguments: "{}".into(),
                    }],
                },
                ChatMessage::Tool {
                    tool_call_id: "c1".into(),
                    content: "noon".into(),
                },
            ],
            tools: vec![ToolSchema {
                name: "clock".into(),
                description: "The time.".into(),
                parameters: json!({"type":"object","properties":{}}),
            }],
            thinking: true,
            banned: Vec::new(),
        };
        let v = body(&request, Some(64));
        assert_eq!(
            v["messages"],
            json!([
                {"role":"assistant","content":"","tool_calls":[
                    {"id":"c1","type":"function","function":{"name":"clock","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"c1","content":"noon"},
            ])
        );
        assert_eq!(
            v["tools"],
            json!([{"type":"function","function":{"name":"clock","description":"The time.",
                "parameters":{"type":"object","properties":{}}}}])
        );
        assert_eq!(v["tool_choice"], "auto");
        assert_eq!(v["max_tokens"], 64);
        assert_eq!(v["chat_template_kwargs"]["enable_thinking"], true);
    }
}
