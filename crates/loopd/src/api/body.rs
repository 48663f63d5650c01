//! Request bodies in and answers out, in bxhttp's one format ([`bxhttp::answer`]): loopd's
//! failures as problems, and its request bodies read within `api.max_body_bytes`.

use super::{ApiFailure, NAMES};
pub(super) use bxhttp::answer::{Body, Problem, json};
use http::StatusCode;
use proto::api::error_kind;
use serde::de::DeserializeOwned;

/// A backend's failure, as the problem it answers with.
impl From<ApiFailure> for Problem {
    fn from(failure: ApiFailure) -> Problem {
        let (status, kind) = match &failure {
            ApiFailure::BadRequest(_) => (StatusCode::BAD_REQUEST, error_kind::BAD_REQUEST),
            ApiFailure::Forbidden(_) => (StatusCode::FORBIDDEN, error_kind::FORBIDDEN),
            ApiFailure::NotFound(_) => (StatusCode::NOT_FOUND, error_kind::NOT_FOUND),
            ApiFailure::Busy(_) => (StatusCode::CONFLICT, error_kind::BUSY),
            ApiFailure::Unavailable(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, error_kind::UNAVAILABLE)
            }
            ApiFailure::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, error_kind::INTERNAL),
            ApiFailure::TooManyWaiting(_) => {
                (StatusCode::TOO_MANY_REQUESTS, error_kind::TOO_MANY_TASKS)
            }
            ApiFailure::OverBudget(_) => (StatusCode::TOO_MANY_REQUESTS, error_kind::BUDGET),
            ApiFailure::InsufficientStorage(_) => (
                StatusCode::INSUFFICIENT_STORAGE,
                error_kind::INSUFFICIENT_STORAGE,
            ),
        };
        Problem::new(status, kind, failure.to_string())
    }
}

/// Reads `request`'s body, at most `max_body_bytes` of it (413 past that), and parses it as a
/// `T` (400 with serde's message).
pub(super) async fn read_json<T, B>(
    request: http::Request<B>,
    max_body_bytes: usize,
) -> Result<T, Problem>
where
    T: DeserializeOwned,
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    bxhttp::request::read_json(request, &NAMES, max_body_bytes, "a valid request").await
}

/// The answer to `GET /metrics` from `source`, in the format `accept` asks for
/// ([`bxmetrics::scrape`]).
pub(super) fn metrics(
    source: &dyn bxmetrics::Source,
    accept: Option<&str>,
) -> http::Response<Body> {
    use http_body_util::BodyExt;
    match bxmetrics::scrape(source, accept) {
        Ok(scraped) => {
            let body = http_body_util::Full::new(bytes::Bytes::from(scraped.body)).boxed();
            let mut response = http::Response::new(body);
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(scraped.content_type),
            );
            response
        }
        Err(_) => Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            error_kind::INTERNAL,
            "the metrics could not be encoded",
        )
        .into_response(),
    }
}
