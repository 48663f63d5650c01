//! Routing: loading period, API key, body cap, and the endpoints.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use serde_json::{Value, json};

use crate::chat::{ChatReply, chat};
use crate::error::ApiError;
use crate::sse::BUILD_INFO;
use crate::state::State;
use crate::template::CHAT_TEMPLATE;

/// The largest request body accepted, in bytes (8 MiB); larger ones get 413.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// The `model_alias` reported by `/props` and `/v1/models`.
pub const MODEL_ALIAS: &str = "fakellama";
/// The `model_path` reported by `/props`.
pub const MODEL_PATH: &str = "fakellama.gguf";

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
    json!({
        "default_generation_settings": {
            "id": 0,
            "id_task": -1,
            "n_ctx": state.n_ctx,
            "speculative": false,
            "is_processing": false,
            "params": { "n_predict": -1, "cache_prompt": true },
        },
        "total_slots": state.slots.snapshot().len(),
        "model_alias": MODEL_ALIAS,
        "model_path": MODEL_PATH,
        "chat_template": CHAT_TEMPLATE,
        "modalities": { "vision": false, "audio": false },
        "build_info": BUILD_INFO,
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
            "id": MODEL_ALIAS,
            "object": "model",
            "created": 0,
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
        (&Method::DELETE, "/fakellama/requests") => {
            state.records.clear();
            json_response(StatusCode::OK, &json!({"cleared": true}))
        }
        (&Method::POST, "/v1/chat/completions" | "/chat/completions") => {
            let body = match Limited::new(request.into_body(), MAX_BODY_BYTES)
                .collect()
                .await
            {
                Ok(collected) => collected.to_bytes(),
                Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                    return Ok(error_response(&ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "invalid_request_error",
                        format!("request body exceeds {MAX_BODY_BYTES} bytes"),
                    )));
                }
                Err(e) => {
                    return Ok(error_response(&ApiError::invalid_request(format!(
                        "cannot read the request body: {e}"
                    ))));
                }
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
        _ => error_response(&ApiError::not_found()),
    };
    Ok(response)
}
