//! Reading and checking a `/v1/chat/completions` request body.
//!
//! Unknown fields are ignored, as llama-server does (`model` too: answers name the server's
//! model); the fields fakellama honours must have the right JSON type, else the request is
//! a `400 invalid_request_error`.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::template::{Message, ToolCallText};

/// The `tool_choice` values llama-server accepts.
const TOOL_CHOICES: [&str; 3] = ["auto", "none", "required"];

/// A checked chat request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<Message>,
    /// The `tools` array, rendered into the prompt in array order.
    pub tools: Vec<Value>,
    /// Whether tool calls come back as `tool_calls` (tools given and `tool_choice` not `none`).
    pub tool_calls_parsed: bool,
    /// `stream`.
    pub stream: bool,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
    /// `id_slot`: `None` when absent or negative (the server chooses).
    pub id_slot: Option<u64>,
    /// `cache_prompt` (default true).
    pub cache_prompt: bool,
    /// `chat_template_kwargs.enable_thinking` (default true).
    pub enable_thinking: bool,
    /// `max_tokens` (or `max_completion_tokens`, `n_predict`); `None` when absent or negative.
    pub max_tokens: Option<u64>,
    /// Why the first earlier tool call whose `arguments` string is not JSON cannot be parsed
    /// (an empty string included): a template with tool support refuses such a request.
    pub bad_call_arguments: Option<String>,
}

fn field_type_error(name: &str, expected: &str) -> ApiError {
    ApiError::invalid_request(format!("\"{name}\" must be {expected}"))
}

fn optional_bool(body: &Map<String, Value>, name: &str, default: bool) -> Result<bool, ApiError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(field_type_error(name, "a boolean")),
    }
}

/// An integer field where a negative value means "not set".
fn optional_count(body: &Map<String, Value>, name: &str) -> Result<Option<u64>, ApiError> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match (n.as_u64(), n.as_i64()) {
            (Some(v), _) => Ok(Some(v)),
            (None, Some(_)) => Ok(None),
            _ => Err(field_type_error(name, "an integer")),
        },
        Some(_) => Err(field_type_error(name, "an integer")),
    }
}

/// The text of a message `content`: a string, null, or an array of `{"type":"text","text":...}`.
fn content_text(value: Option<&Value>, index: usize) -> Result<String, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match part.get("text") {
                    Some(Value::String(t)) => text.push_str(t),
                    _ => {
                        return Err(ApiError::invalid_request(format!(
                            "messages[{index}].content: only text parts are supported"
                        )));
                    }
                }
            }
            Ok(text)
        }
        Some(_) => Err(ApiError::invalid_request(format!(
            "messages[{index}].content must be a string, an array of parts or null"
        ))),
    }
}

/// The parse error of the first call in `calls` whose `arguments` is a string that is not JSON.
fn bad_call_arguments(calls: &[Value]) -> Option<String> {
    calls.iter().find_map(|call| {
        let arguments = call.get("function")?.get("arguments")?.as_str()?;
        serde_json::from_str::<Value>(arguments)
            .err()
            .map(|e| e.to_string())
    })
}

fn tool_calls(value: Option<&Value>, index: usize) -> Result<Vec<ToolCallText>, ApiError> {
    let calls = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(calls)) => calls,
        Some(_) => {
            return Err(ApiError::invalid_request(format!(
                "messages[{index}].tool_calls must be an array"
            )));
        }
    };
    calls
        .iter()
        .map(|call| {
            let function = call.get("function");
            let name = function.and_then(|f| f.get("name")).and_then(Value::as_str);
            let Some(name) = name else {
                return Err(ApiError::invalid_request(format!(
                    "messages[{index}].tool_calls: each call needs function.name"
                )));
            };
            let arguments = match function.and_then(|f| f.get("arguments")) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            Ok(ToolCallText {
                name: name.to_owned(),
                arguments,
            })
        })
        .collect()
}

fn message(value: &Value, index: usize) -> Result<Message, ApiError> {
    let Some(object) = value.as_object() else {
        return Err(ApiError::invalid_request(format!(
            "messages[{index}] must be an object"
        )));
    };
    let Some(role) = object.get("role").and_then(Value::as_str) else {
        return Err(ApiError::invalid_request(format!(
            "messages[{index}] needs a string \"role\""
        )));
    };
    let reasoning = match object.get("reasoning_content") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    Ok(Message {
        role: role.to_owned(),
        content: content_text(object.get("content"), index)?,
        reasoning,
        tool_calls: tool_calls(object.get("tool_calls"), index)?,
    })
}

impl ChatRequest {
    /// Checks a request body.
    pub fn from_json(body: &Value) -> Result<Self, ApiError> {
        let Some(body) = body.as_object() else {
            return Err(ApiError::invalid_request("the body must be a JSON object"));
        };
        let messages = match body.get("messages") {
            Some(Value::Array(list)) if !list.is_empty() => list
                .iter()
                .enumerate()
                .map(|(i, m)| message(m, i))
                .collect::<Result<Vec<_>, _>>()?,
            _ => {
                return Err(ApiError::invalid_request(
                    "\"messages\" must be a non-empty array of messages",
                ));
            }
        };
        let tools = match body.get("tools") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(tools)) => tools.clone(),
            Some(_) => return Err(field_type_error("tools", "an array")),
        };
        let tool_choice = match body.get("tool_choice") {
            None | Some(Value::Null) => "auto",
            Some(Value::String(s)) if TOOL_CHOICES.contains(&s.as_str()) => s.as_str(),
            Some(Value::String(s)) => {
                return Err(ApiError::invalid_request(format!(
                    "Invalid tool_choice: {s}"
                )));
            }
            Some(_) => return Err(field_type_error("tool_choice", "a string")),
        };
        let include_usage = match body.get("stream_options") {
            None | Some(Value::Null) => false,
            Some(Value::Object(options)) => optional_bool(options, "include_usage", false)?,
            Some(_) => return Err(field_type_error("stream_options", "an object")),
        };
        let enable_thinking = match body.get("chat_template_kwargs") {
            None | Some(Value::Null) => true,
            Some(Value::Object(kwargs)) => optional_bool(kwargs, "enable_thinking", true)?,
            Some(_) => return Err(field_type_error("chat_template_kwargs", "an object")),
        };
        let id_slot = match body.get("id_slot") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.as_u64(),
            Some(_) => return Err(field_type_error("id_slot", "an integer")),
        };
        let max_tokens = match optional_count(body, "max_tokens")? {
            Some(n) => Some(n),
            None => match optional_count(body, "max_completion_tokens")? {
                Some(n) => Some(n),
                None => optional_count(body, "n_predict")?,
            },
        };
        let bad_call_arguments = body
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
            .find_map(|calls| bad_call_arguments(calls));
        Ok(Self {
            messages,
            bad_call_arguments,
            tool_calls_parsed: !tools.is_empty() && tool_choice != "none",
            tools,
            stream: optional_bool(body, "stream", false)?,
            include_usage,
            id_slot,
            cache_prompt: optional_bool(body, "cache_prompt", true)?,
            enable_thinking,
            max_tokens,
        })
    }

    /// llama-server's refusal of a request that holds a tool call whose arguments are not
    /// JSON, when its template supports tools (`500 server_error`, before anything is
    /// generated, streamed or not).
    pub fn call_arguments_error(&self) -> Option<ApiError> {
        self.bad_call_arguments.as_ref().map(|why| {
            ApiError::new(
                http::StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                format!("Failed to parse tool call arguments as JSON: {why}"),
            )
        })
    }

    /// The last message (there is always one).
    pub fn last_message(&self) -> Option<&Message> {
        self.messages.last()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_and_checks() {
        let r = ChatRequest::from_json(&json!({"messages":[{"role":"user","content":"hi"}],"x":1}))
            .unwrap();
        assert!(r.cache_prompt && r.enable_thinking && !r.stream);
        assert_eq!(r.id_slot, None);
        let r =
            ChatRequest::from_json(&json!({"messages":[{"role":"user"}],"id_slot":-1})).unwrap();
        assert_eq!(r.id_slot, None);
        for bad in [
            json!({"messages":[]}),
            json!({"messages":[{"content":"x"}]}),
            json!({"messages":[{"role":"user"}],"tool_choice":{"type":"function"}}),
            json!({"messages":[{"role":"user"}],"chat_template_kwargs":{"enable_thinking":"no"}}),
        ] {
            let err = ChatRequest::from_json(&bad).unwrap_err();
            assert_eq!(err.kind, "invalid_request_error", "{bad}");
        }
    }
}
