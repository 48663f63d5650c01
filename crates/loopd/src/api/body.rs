//! Request bodies in and answers out, in bxhttp's one format ([`bxhttp::answer`]): loopd's
//! failures as problems, and its request bodies read within `api.max_body_bytes`.

use super::{ApiFailure, NAMES};
pub(super) use bxhttp::answer::{Body, Problem, json};
use http::StatusCode;
use proto::api::{ApprovalAnswer, OwnerAnswer, error_kind};
use serde::de::DeserializeOwned;

/// A backend's failure, as the problem it answers with.
impl From<ApiFailure> for Problem {
    fn from(failure: ApiFailure) -> Problem {
        let (status, kind) = match &failure {
            ApiFailure::BadRequest(_) => (StatusCode::BAD_REQUEST, error_kind::BAD_REQUEST),
            ApiFailure::Forbidden(_) => (StatusCode::FORBIDDEN, error_kind::FORBIDDEN),
            ApiFailure::NotFound(_) => (StatusCode::NOT_FOUND, error_kind::NOT_FOUND),
            ApiFailure::Busy(_) => (StatusCode::CONFLICT, error_kind::BUSY),
            ApiFailure::Conflict(_) => (StatusCode::CONFLICT, error_kind::CONFLICT),
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

/// The words `answer` takes in `POST /v1/approvals/{id}`, every [`OwnerAnswer`] (a test keeps
/// the list whole).
const OWNER_ANSWERS: [OwnerAnswer; 3] = [
    OwnerAnswer::Approve,
    OwnerAnswer::ApproveForTurn,
    OwnerAnswer::Deny,
];

/// Reads an approval's answer (`POST /v1/approvals/{id}`) like [`read_json`]; a body whose
/// `answer` is missing or not one of the words gets a 400 that names them. serde names them
/// only for an unknown word: for a number, `null` or no `answer` it says "expected value" or
/// "missing field", which does not tell the client what to send.
pub(super) async fn read_approval_answer<B>(
    request: http::Request<B>,
    max_body_bytes: usize,
) -> Result<ApprovalAnswer, Problem>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let bytes = bxhttp::request::read_body(request, &NAMES, max_body_bytes).await?;
    serde_json::from_slice(&bytes).map_err(|e| {
        let given = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|body| body.get("answer").cloned());
        match given {
            Some(answer) if serde_json::from_value::<OwnerAnswer>(answer.clone()).is_ok() => {
                Problem::bad_request(format!("the request body is not a valid answer: {e}"))
            }
            Some(answer) => Problem::bad_request(format!(
                "`answer` must be one of {}, is {answer}",
                owner_answer_words()
            )),
            None => Problem::bad_request(format!(
                "the request body is not a valid answer ({e}): `answer` must be one of {}",
                owner_answer_words()
            )),
        }
    })
}

/// `"approve", "approve_for_turn", "deny"`: the words of [`OWNER_ANSWERS`] as JSON strings.
fn owner_answer_words() -> String {
    OWNER_ANSWERS
        .iter()
        .filter_map(|answer| serde_json::to_string(answer).ok())
        .collect::<Vec<_>>()
        .join(", ")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_answers_are_every_owner_answer_once() {
        // A new answer stops this match compiling until it is listed in OWNER_ANSWERS too.
        let place = |answer: OwnerAnswer| match answer {
            OwnerAnswer::Approve => 0,
            OwnerAnswer::ApproveForTurn => 1,
            OwnerAnswer::Deny => 2,
        };
        assert_eq!(OWNER_ANSWERS.map(place), [0, 1, 2]);
        assert_eq!(
            owner_answer_words(),
            r#""approve", "approve_for_turn", "deny""#
        );
    }
}
