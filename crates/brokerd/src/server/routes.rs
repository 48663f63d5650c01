//! The routes: `POST /v1/call`, `GET /v1/catalogue?session=ID`, `GET /v1/health`; JSON in
//! (size-capped) and out, errors as `proto::api::ApiError`.

use crate::broker::Broker;
use bxcore::SessionId;
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use proto::ToolRequest;
use proto::api::{ApiError, error_kind};
use serde::Serialize;
use std::convert::Infallible;
use std::sync::Arc;

/// Every answer's body type.
pub(super) type Body = BoxBody<Bytes, Infallible>;

/// What `GET /v1/health` answers.
#[derive(Debug, Serialize)]
struct Health {
    status: &'static str,
}

/// An error answer: its status, `kind` word and message.
#[derive(Debug)]
pub(super) struct Problem {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl Problem {
    pub(super) fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Problem {
            status,
            kind,
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, error_kind::BAD_REQUEST, message)
    }

    fn too_large(max_body_bytes: usize) -> Problem {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            error_kind::TOO_LARGE,
            format!(
                "the request body is larger than {max_body_bytes} bytes (limits.max_body_bytes)"
            ),
        )
    }

    pub(super) fn into_response(self) -> Response<Body> {
        let error = ApiError::new(self.status.as_u16(), self.kind, self.message);
        json(self.status, &error)
    }
}

/// `value` as a JSON answer of `status`.
fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    let (status, bytes) = match serde_json::to_vec(value) {
        Ok(bytes) => (status, bytes),
        Err(e) => {
            tracing::error!("cannot serialise an answer: {e}");
            let error = ApiError::new(500, error_kind::INTERNAL, "cannot serialise the answer");
            let bytes = serde_json::to_vec(&error).unwrap_or_default();
            (StatusCode::INTERNAL_SERVER_ERROR, bytes)
        }
    };
    let mut response = Response::new(Full::new(Bytes::from(bytes)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Answers one request; never fails (errors are answers).
pub(super) async fn handle<I>(
    broker: Arc<Broker>,
    max_body_bytes: usize,
    request: Request<I>,
) -> Result<Response<Body>, Infallible>
where
    I: hyper::body::Body,
    I::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = dispatch(broker, max_body_bytes, request)
        .await
        .unwrap_or_else(Problem::into_response);
    tracing::trace!(%method, %path, status = response.status().as_u16(), "request");
    Ok(response)
}

async fn dispatch<I>(
    broker: Arc<Broker>,
    max_body_bytes: usize,
    request: Request<I>,
) -> Result<Response<Body>, Problem>
where
    I: hyper::body::Body,
    I::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let path = request.uri().path();
    let allowed = match path {
        "/v1/call" => Method::POST,
        "/v1/catalogue" | "/v1/health" => Method::GET,
        _ => {
            return Err(Problem::new(
                StatusCode::NOT_FOUND,
                error_kind::NOT_FOUND,
                format!("no such path: {path}"),
            ));
        }
    };
    if request.method() != allowed {
        return Err(Problem::new(
            StatusCode::METHOD_NOT_ALLOWED,
            error_kind::METHOD_NOT_ALLOWED,
            format!("{path} takes {allowed}, not {}", request.method()),
        ));
    }
    match path {
        "/v1/health" => Ok(json(StatusCode::OK, &Health { status: "ok" })),
        "/v1/catalogue" => {
            let session = session_query(request.uri().query())?;
            Ok(json(StatusCode::OK, &broker.catalogue(&session)))
        }
        _ => {
            let body = read_body(request, max_body_bytes).await?;
            let tool_request: ToolRequest = serde_json::from_slice(&body).map_err(|e| {
                Problem::bad_request(format!("the request body is not a ToolRequest: {e}"))
            })?;
            // On its own task, so the call ends, and is audited, even if the client goes away.
            let response = tokio::spawn(async move { broker.call(&tool_request).await })
                .await
                .map_err(|e| {
                    Problem::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        error_kind::INTERNAL,
                        format!("the call's task failed: {e}"),
                    )
                })?;
            Ok(json(StatusCode::OK, &response))
        }
    }
}

/// The session of `?session=ID`; anything else in the query is an error that says what.
fn session_query(query: Option<&str>) -> Result<SessionId, Problem> {
    let mut session = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("session", value)) => {
                let id = SessionId::new(value)
                    .map_err(|e| Problem::bad_request(format!("query parameter session: {e}")))?;
                session = Some(id);
            }
            _ => {
                return Err(Problem::bad_request(format!(
                    "unknown query parameter {pair:?}; use session=ID"
                )));
            }
        }
    }
    session.ok_or_else(|| Problem::bad_request("the query parameter session=ID is required"))
}

/// The body, at most `max_body_bytes` of it: 413 past that (by `Content-Length` before
/// reading, and while reading).
async fn read_body<I>(request: Request<I>, max_body_bytes: usize) -> Result<Bytes, Problem>
where
    I: hyper::body::Body,
    I::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body_bytes as u64) {
        return Err(Problem::too_large(max_body_bytes));
    }
    match Limited::new(request.into_body(), max_body_bytes)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(Problem::too_large(max_body_bytes))
        }
        Err(e) => Err(Problem::bad_request(format!(
            "cannot read the request body: {e}"
        ))),
    }
}
