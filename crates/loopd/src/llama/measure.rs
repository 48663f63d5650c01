//! Measuring a prompt before it is sent: llama-server renders the chat request with its own
//! template (`POST /apply-template`) and counts the result with the model's tokeniser
//! (`POST /tokenize`), which gives exactly the `prompt_tokens` the chat request would report.
//! Compaction sizes its request with it, and a turn checks with it that its next call fits
//! the slot (`compact`).

use std::time::Duration;

use http::Method;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::client::PROBE_TIMEOUT_MS;
use super::error::InferError;
use super::kept::Kept;
use super::message::ChatRequest;
use super::options::ClientOptions;
use super::transport::{self, Outgoing};
use super::wire;

/// The endpoint that renders a chat request into its prompt.
const APPLY_TEMPLATE_PATH: &str = "/apply-template";
/// The endpoint that tokenises text.
const TOKENIZE_PATH: &str = "/tokenize";
/// The largest answer of either endpoint read, in bytes: a prompt, or its token ids.
const MAX_MEASURE_BODY_BYTES: usize = 16 * 1024 * 1024;

#[derive(Deserialize)]
struct Rendered {
    prompt: String,
}

#[derive(Deserialize)]
struct Tokens {
    tokens: Vec<IgnoredAny>,
}

/// The tokens of the prompt `request` renders into, as the server counts them.
pub(super) async fn prompt_tokens(
    options: &ClientOptions,
    kept: &Kept,
    request: &ChatRequest,
) -> Result<u32, InferError> {
    let chat =
        wire::chat_body(request, None).map_err(|message| InferError::BadConfig { message })?;
    let rendered: Rendered = post(options, kept, APPLY_TEMPLATE_PATH, chat).await?;
    // `add_special` as the chat request tokenises its prompt (a BOS token where the model
    // wants one).
    let body = serde_json::json!({ "content": rendered.prompt, "add_special": true });
    let tokens: Tokens = post(options, kept, TOKENIZE_PATH, body.to_string().into_bytes()).await?;
    Ok(u32::try_from(tokens.tokens.len()).unwrap_or(u32::MAX))
}

/// The tokens of `text` alone, as the server's tokeniser counts them (no special tokens
/// added).
pub(super) async fn text_tokens(
    options: &ClientOptions,
    kept: &Kept,
    text: &str,
) -> Result<u32, InferError> {
    let body = serde_json::json!({ "content": text });
    let tokens: Tokens = post(options, kept, TOKENIZE_PATH, body.to_string().into_bytes()).await?;
    Ok(u32::try_from(tokens.tokens.len()).unwrap_or(u32::MAX))
}

/// One JSON POST within [`PROBE_TIMEOUT_MS`], its answer read as `T`.
async fn post<T: for<'de> Deserialize<'de>>(
    options: &ClientOptions,
    kept: &Kept,
    path: &str,
    body: Vec<u8>,
) -> Result<T, InferError> {
    post_within(options, kept, path, body, PROBE_TIMEOUT_MS).await
}

/// One JSON POST within `timeout_ms`, its answer (2xx) read as `T`; any other status is the
/// server's error ([`InferError::from_answer`]).
pub(super) async fn post_within<T: for<'de> Deserialize<'de>>(
    options: &ClientOptions,
    kept: &Kept,
    path: &str,
    body: Vec<u8>,
    timeout_ms: u64,
) -> Result<T, InferError> {
    let outgoing = Outgoing {
        method: Method::POST,
        path,
        body: Some(body),
        event_stream: false,
        api_key: options.api_key.as_deref(),
    };
    let exchange = async {
        let exchange = transport::send(options, kept, timeout_ms, outgoing).await?;
        transport::read_answer(exchange, MAX_MEASURE_BODY_BYTES).await
    };
    let (status, body) = tokio::time::timeout(Duration::from_millis(timeout_ms), exchange)
        .await
        .unwrap_or(Err(InferError::Timeout {
            after_ms: timeout_ms,
        }))?;
    if !(200..300).contains(&status) {
        return Err(InferError::from_answer(status, &body));
    }
    serde_json::from_slice(&body).map_err(|e| InferError::BadResponse {
        message: format!("{path} answered something loopd cannot read: {e}"),
    })
}
