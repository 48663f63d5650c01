//! Routing: loading period, API key, body cap, and the endpoints (slot actions in
//! [`crate::slot_actions`]).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use serde_json::{Value, json};

use crate::chat::{ChatReply, chat};
use crate::error::ApiError;
use crate::reply::END_OF_TURN;
use crate::slot_actions::slot_action;
use crate::sse::{BUILD_INFO, unix_now};
use crate::state::State;
use crate::template::{CHAT_TEMPLATE, CHAT_TEMPLATE_WITHOUT_TOOLS};
use crate::tokens::{apply_template_answer, tokenize_answer};

/// The largest request body accepted, in bytes (8 MiB); larger ones get 413.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// `/props` `bos_token` (as SmolLM2's).
pub const BOS_TOKEN: &str = "<|im_start|>";
/// `/props` `model_ftype`.
pub const MODEL_FTYPE: &str = "Q8_0";

/// The response body type.
pub type Body = BoxBody<Bytes, Infallible>;

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json; charset=utf-8"),
    );
    response
}

fn error_response(error: &ApiError) -> Response<Body> {
    json_response(error.status, &error.to_json())
}

fn authorized(headers: &HeaderMap, key: &str) -> bool {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|v| v.trim() == key);
    let x_api_key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == key);
    bearer || x_api_key
}

fn props(state: &State) -> Value {
    let tools = state.tool_template;
    json!({
        "default_generation_settings": {
            "n_ctx": state.n_ctx,
            "params": { "n_predict": -1, "cache_prompt": true },
        },
        "total_slots": state.slots.snapshot().len(),
        "model_alias": state.model_path,
        "model_ftype": MODEL_FTYPE,
        "model_path": state.model_path,
        "modalities": { "vision": false, "video": false, "audio": false },
        "endpoint_slots": true,
        "endpoint_props": false,
        "endpoint_metrics": false,
        "chat_template": if tools { CHAT_TEMPLATE } else { CHAT_TEMPLATE_WITHOUT_TOOLS },
        "chat_template_caps": {
            "supports_tools": tools,
            "supports_tool_calls": tools,
            "supports_parallel_tool_calls": tools,
            "supports_system_role": true,
            "supports_string_content": true,
            "supports_typed_content": false,
        },
        "bos_token": BOS_TOKEN,
        "eos_token": END_OF_TURN,
        "build_info": BUILD_INFO,
        "is_sleeping": false,
    })
}

fn slots(state: &State) -> Value {
    let slots: Vec<Value> = state
        .slots
        .snapshot()
        .into_iter()
        .map(|s| {
            json!({
                "id": s.id,
                "id_task": -1,
                "n_ctx": state.n_ctx,
                "speculative": false,
                "is_processing": s.is_processing,
                "n_prompt_tokens": s.n_cached_tokens,
            })
        })
        .collect();
    Value::Array(slots)
}

fn models(state: &State) -> Value {
    json!({
        "object": "list",
        "data": [{
            "id": state.model_path,
            "object": "model",
            "created": unix_now(),
            "owned_by": "llamacpp",
            "meta": { "n_ctx_train": state.n_ctx },
        }],
    })
}

/// Answers one HTTP request.
pub async fn handle<B>(state: Arc<State>, request: Request<B>) -> Result<Response<Body>, Infallible>
where
    B: hyper::body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    if state.loading() {
        return Ok(error_response(&ApiError::loading()));
    }
    let public = matches!(path.as_str(), "/health" | "/v1/health");
    let required_key = state.api_key.as_deref().filter(|_| !public);
    if required_key.is_some_and(|key| !authorized(request.headers(), key)) {
        tracing::debug!(%path, "rejected: bad or missing API key");
        return Ok(error_response(&ApiError::unauthorized()));
    }
    if method == Method::POST
        && let Some(id) = path.strip_prefix("/slots/").filter(|id| !id.contains('/'))
    {
        let query = request.uri().query().map(str::to_owned);
        let body = read_body(request).await;
        return Ok(
            match slot_action(&state, id, query.as_deref(), body).await {
                Ok(value) => json_response(StatusCode::OK, &value),
                Err(error) => error_response(&error),
            },
        );
    }
    let response = match (&method, path.as_str()) {
        (&Method::GET, "/health" | "/v1/health") => {
            json_response(StatusCode::OK, &json!({"status":"ok"}))
        }
        (&Method::GET, "/props") => json_response(StatusCode::OK, &props(&state)),
        (&Method::GET, "/slots") => json_response(StatusCode::OK, &slots(&state)),
        (&Method::GET, "/v1/models" | "/models") => json_response(StatusCode::OK, &models(&state)),
        (&Method::GET, "/fakellama/requests") => {
            let records = serde_json::to_value(state.records.all()).unwrap_or(Value::Null);
            json_response(StatusCode::OK, &records)
        }
        (&Method::GET, "/fakellama/stats") => json_response(
            StatusCode::OK,
            &json!({
                "max_busy_slots": state.slots.max_busy(),
                "connections": state.connections.load(std::sync::atomic::Ordering::Relaxed),
            }),
        ),
        (&Method::DELETE, "/fakellama/requests") => {
            state.records.clear();
            json_response(StatusCode::OK, &json!({"cleared": true}))
        }
        (&Method::POST, "/v1/chat/completions" | "/chat/completions") => {
            let body = match read_body(request).await {
                Ok(body) => body,
                Err(error) => return Ok(error_response(&error)),
            };
            match chat(&state, &path, &body).await {
                ChatReply::Json(status, value) => json_response(status, &value),
                ChatReply::Stream(channel) => {
                    let mut response = Response::new(channel.boxed());
                    let headers = response.headers_mut();
                    headers.insert(
                        header::CONTENT_TYPE,
                        header::HeaderValue::from_static("text/event-stream"),
                    );
                    headers.insert(
                        header::CACHE_CONTROL,
                        header::HeaderValue::from_static("no-cache"),
                    );
                    response
                }
            }
        }
        (&Method::POST, "/tokenize" | "/apply-template") => {
            let answer = match read_body(request).await {
                Ok(body) => measure(&state, &path, &body),
                Err(error) => Err(error),
            };
            match answer {
                Ok(value) => json_response(StatusCode::OK, &value),
                Err(error) => error_response(&error),
            }
        }
        _ => error_response(&ApiError::not_found()),
    };
    Ok(response)
}

/// Reads a request body of at most [`MAX_BODY_BYTES`].
async fn read_body<B>(request: Request<B>) -> Result<Bytes, ApiError>
where
    B: hyper::body::Body,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    match Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("request body exceeds {MAX_BODY_BYTES} bytes"),
        )),
        Err(e) => Err(ApiError::invalid_request(format!(
            "cannot read the request body: {e}"
        ))),
    }
}

/// `/tokenize` or `/apply-template` on a JSON `body`.
fn measure(state: &State, path: &str, body: &[u8]) -> Result<Value, ApiError> {
    let value = serde_json::from_slice::<Value>(body)
        .map_err(|e| ApiError::invalid_request(format!("the body is not valid JSON: {e}")))?;
    if path == "/tokenize" {
        tokenize_answer(&value)
    } else {
        apply_template_answer(&value, state.tool_template)
    }
}
