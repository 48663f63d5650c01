//! Request bodies in (size-capped, strict JSON) and JSON answers out, errors included.

use super::ApiFailure;
use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use proto::api::{ApiError, error_kind};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::convert::Infallible;

/// Every answer's body type.
pub(super) type Body = BoxBody<Bytes, Infallible>;

/// `value` as a JSON answer of `status`.
pub(super) fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    match serde_json::to_vec(value) {
        Ok(bytes) => with_json_body(status, bytes),
        Err(e) => {
            tracing::error!("cannot serialise an answer: {e}");
            let error = ApiError::new(500, error_kind::INTERNAL, format!("cannot serialise: {e}"));
            with_json_body(
                StatusCode::INTERNAL_SERVER_ERROR,
                serde_json::to_vec(&error).unwrap_or_default(),
            )
        }
    }
}

fn with_json_body(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(bytes)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// An error answer not yet built: small to pass around, made a response at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Problem {
    /// The HTTP status.
    pub status: StatusCode,
    /// The `kind` word, one of [`error_kind`].
    pub kind: &'static str,
    /// What was wrong, for people.
    pub message: String,
    /// For 405: the method the path takes.
    pub allow: Option<Method>,
}

impl Problem {
    /// A problem of `status` and `kind` saying `message`.
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Problem {
        Problem {
            status,
            kind,
            message: message.into(),
            allow: None,
        }
    }

    /// A 400.
    pub fn bad_request(message: impl Into<String>) -> Problem {
        Problem::new(StatusCode::BAD_REQUEST, error_kind::BAD_REQUEST, message)
    }

    fn too_large(max_body_bytes: usize) -> Problem {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            error_kind::TOO_LARGE,
            format!("the request body is larger than {max_body_bytes} bytes (api.max_body_bytes)"),
        )
    }

    /// The [`ApiError`] answer.
    pub fn into_response(self) -> Response<Body> {
        let error = ApiError::new(self.status.as_u16(), self.kind, self.message);
        let mut response = json(self.status, &error);
        if let Some(allow) = self.allow
            && let Ok(value) = HeaderValue::from_str(allow.as_str())
        {
            response.headers_mut().insert(header::ALLOW, value);
        }
        response
    }
}

impl From<ApiFailure> for Problem {
    fn from(failure: ApiFailure) -> Problem {
        let (status, kind) = match &failure {
            ApiFailure::BadRequest(_) => (StatusCode::BAD_REQUEST, error_kind::BAD_REQUEST),
            ApiFailure::NotFound(_) => (StatusCode::NOT_FOUND, error_kind::NOT_FOUND),
            ApiFailure::Busy(_) => (StatusCode::CONFLICT, error_kind::BUSY),
            ApiFailure::Unavailable(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, error_kind::UNAVAILABLE)
            }
            ApiFailure::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, error_kind::INTERNAL),
            ApiFailure::TooManyWaiting(_) => {
                (StatusCode::TOO_MANY_REQUESTS, error_kind::TOO_MANY_TASKS)
            }
            ApiFailure::InsufficientStorage(_) => (
                StatusCode::INSUFFICIENT_STORAGE,
                error_kind::INSUFFICIENT_STORAGE,
            ),
        };
        Problem::new(status, kind, failure.to_string())
    }
}

/// Reads `request`'s body, at most `max_body_bytes` of it (413 past that: by `Content-Length`
/// before reading, and while reading), and parses it as a `T` (400 with serde's message).
pub(super) async fn read_json<T, B>(
    request: http::Request<B>,
    max_body_bytes: usize,
) -> Result<T, Problem>
where
    T: DeserializeOwned,
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body_bytes as u64) {
        return Err(Problem::too_large(max_body_bytes));
    }
    let bytes = match Limited::new(request.into_body(), max_body_bytes)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            return Err(Problem::too_large(max_body_bytes));
        }
        Err(e) => {
            return Err(Problem::bad_request(format!(
                "cannot read the request body: {e}"
            )));
        }
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| Problem::bad_request(format!("the request body is not a valid request: {e}")))
}
