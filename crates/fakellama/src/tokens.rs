//! `POST /tokenize` and `POST /apply-template`: what a client measures a prompt with before
//! it sends it (loopd sizes a compaction so its answer has room, and compacts before a call
//! that would not fit the slot).
//!
//! Both use the same template and tokeniser as `/v1/chat/completions`, so a prompt rendered
//! by `/apply-template` and counted by `/tokenize` has exactly the `prompt_tokens` the chat
//! request would report, as with llama-server.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::request::ChatRequest;
use crate::template::render_prompt;
use crate::tokenize::tokenize;

/// FNV-1a's offset basis and prime (32 bits): a token's id is the hash of its text.
const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

/// A token's id: a stable number made from its text (fakellama has no vocabulary), below
/// 2^31 like a real model's.
pub fn token_id(token: &str) -> u32 {
    let hash = token.bytes().fold(FNV_OFFSET, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(FNV_PRIME)
    });
    hash & 0x7fff_ffff
}

/// `POST /tokenize` `{"content": TEXT}` → `{"tokens": [id, ...]}`.
pub fn tokenize_answer(body: &Value) -> Result<Value, ApiError> {
    let Some(content) = body.get("content").and_then(Value::as_str) else {
        return Err(ApiError::invalid_request(
            "\"content\" must be a string: the text to tokenise",
        ));
    };
    let ids: Vec<u32> = tokenize(content).iter().map(|t| token_id(t)).collect();
    Ok(json!({ "tokens": ids }))
}

/// `POST /apply-template` (a chat body) → `{"prompt": TEXT}`: the prompt the chat request
/// would be rendered into, tools included when the template supports them.
pub fn apply_template_answer(body: &Value, tool_template: bool) -> Result<Value, ApiError> {
    let request = ChatRequest::from_json(body)?;
    let tools: &[Value] = if tool_template { &request.tools } else { &[] };
    Ok(json!({ "prompt": render_prompt(&request.messages, tools) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rendered_prompt_counts_as_the_chat_request_would() {
        let chat = json!({"messages":[{"role":"user","content":"Hello, world"}]});
        let prompt = apply_template_answer(&chat, true).unwrap()["prompt"].clone();
        let tokens = tokenize_answer(&json!({ "content": prompt })).unwrap();
        let count = tokens["tokens"].as_array().unwrap().len();
        assert_eq!(count, tokenize(prompt.as_str().unwrap()).len());
        assert_eq!(token_id("Hell"), token_id("Hell"));
        assert_ne!(token_id("Hell"), token_id("o"));
    }

    #[test]
    fn bad_bodies_say_what_is_wrong() {
        let e = tokenize_answer(&json!({"text": "x"})).unwrap_err();
        assert!(e.message.contains("content"), "{}", e.message);
        let e = apply_template_answer(&json!({"messages": []}), true).unwrap_err();
        assert_eq!(e.kind, "invalid_request_error");
    }
}
