//! Answers out in the one error body format, [`proto::api::ApiError`]
//! (`{"error":{"code","kind","message"}}`): JSON answers, the [`Problem`] every route's error
//! becomes, and the answers a daemon gives before its routes run (403, 503, 400/414/431), so
//! loopd and brokerd cannot drift apart in them.

use crate::Names;
use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use proto::api::{ApiError, error_kind};
use serde::Serialize;
use std::convert::Infallible;

/// The body of every answer a daemon sends.
pub type Body = BoxBody<Bytes, Infallible>;

/// `value` as a JSON answer of `status`; a value that cannot be serialised is a 500 that says
/// so (logged).
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
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
pub struct Problem {
    /// The HTTP status.
    pub status: StatusCode,
    /// The `kind` word, one of [`error_kind`].
    pub kind: &'static str,
    /// What was wrong, for people.
    pub message: String,
    /// For 405: the method the path takes, sent as `Allow`.
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

    /// The 404 of a path no route takes.
    pub fn no_such_path(path: &str) -> Problem {
        Problem::new(
            StatusCode::NOT_FOUND,
            error_kind::NOT_FOUND,
            format!("no such path: {path}"),
        )
    }

    /// The 405 of `path` asked with `method`: it names, and sends as `Allow`, the one method
    /// the path takes.
    pub fn wrong_method(path: &str, allowed: Method, method: &Method) -> Problem {
        Problem {
            allow: Some(allowed.clone()),
            ..Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                error_kind::METHOD_NOT_ALLOWED,
                format!("{path} takes {allowed}, not {method}"),
            )
        }
    }

    /// The 413 of a body over `max_body_bytes`, naming the daemon's key for it.
    pub fn too_large(names: &Names, max_body_bytes: usize) -> Problem {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            error_kind::TOO_LARGE,
            format!(
                "the request body is larger than {max_body_bytes} bytes ({})",
                names.max_body_bytes_key()
            ),
        )
    }

    /// The [`ApiError`] answer, with `Allow` for a 405.
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

/// The 403 a refused peer gets ([`crate::Handler::refused`]); `why` is what the peer check
/// said.
pub fn refused(names: &Names, why: &str) -> Response<Body> {
    let message = format!("this peer may not use {}: {why}", names.daemon);
    Problem::new(StatusCode::FORBIDDEN, error_kind::FORBIDDEN, message).into_response()
}

/// The 503 of a server at its connection cap with every connection busy
/// ([`crate::Handler::overloaded`]).
pub fn overloaded(names: &Names, why: &str) -> Response<Body> {
    let message = format!(
        "{} is at {}: {why}; try again shortly",
        names.daemon,
        names.max_connections_key()
    );
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        error_kind::UNAVAILABLE,
        message,
    )
    .into_response()
}

/// The answer to a request head hyper could not read ([`crate::Handler::malformed`]).
pub fn malformed(status: StatusCode, why: &str) -> Response<Body> {
    let kind = error_kind::unreadable(status.as_u16());
    Problem::new(status, kind, why).into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    use crate::names::TEST_NAMES as NAMES;

    async fn error_of(response: Response<Body>) -> ApiError {
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn a_wrong_method_names_and_allows_the_one_the_path_takes() {
        let response = Problem::wrong_method("/v1/x", Method::POST, &Method::GET).into_response();
        assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(response.headers()[header::ALLOW], "POST");
        let error = error_of(response).await;
        assert_eq!(error.error.kind, error_kind::METHOD_NOT_ALLOWED);
        assert_eq!(error.error.message, "/v1/x takes POST, not GET");
    }

    #[tokio::test]
    async fn the_answers_before_the_routes_name_the_daemon_and_its_keys() {
        let error = error_of(refused(&NAMES, "uid 7 is not welcome")).await;
        assert_eq!(
            (error.error.code, error.error.kind.as_str()),
            (403, "forbidden")
        );
        assert_eq!(
            error.error.message,
            "this peer may not use testd: uid 7 is not welcome"
        );
        let error = error_of(overloaded(&NAMES, "all 2 busy")).await;
        assert_eq!(error.error.code, 503);
        assert!(
            error
                .error
                .message
                .contains("testd is at test.max_connections")
        );
        let error = error_of(malformed(StatusCode::URI_TOO_LONG, "too long")).await;
        assert_eq!(
            (error.error.code, error.error.kind.as_str()),
            (414, "uri_too_long")
        );
        let error = error_of(Problem::too_large(&NAMES, 9).into_response()).await;
        assert!(
            error
                .error
                .message
                .contains("9 bytes (test.max_body_bytes)")
        );
    }
}
