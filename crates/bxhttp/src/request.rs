//! Request bodies in: read within the daemon's byte cap (413 past it), then parsed as strict
//! JSON (400 with serde's words).

use crate::Names;
use crate::answer::Problem;
use bytes::Bytes;
use http::{Request, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;

/// Reads `request`'s body, at most `max_body_bytes` of it: 413 past that, by `Content-Length`
/// before reading and while reading (a chunked body declares nothing).
pub async fn read_body<B>(
    request: Request<B>,
    names: &Names,
    max_body_bytes: usize,
) -> Result<Bytes, Problem>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body_bytes as u64) {
        return Err(Problem::too_large(names, max_body_bytes));
    }
    match Limited::new(request.into_body(), max_body_bytes)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(Problem::too_large(names, max_body_bytes))
        }
        Err(e) => Err(Problem::bad_request(format!(
            "cannot read the request body: {e}"
        ))),
    }
}

/// [`read_body`], parsed as a `T`; a body that is not one is a 400 saying "the request body is
/// not `what`" and serde's reason.
pub async fn read_json<T, B>(
    request: Request<B>,
    names: &Names,
    max_body_bytes: usize,
    what: &str,
) -> Result<T, Problem>
where
    T: DeserializeOwned,
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let bytes = read_body(request, names, max_body_bytes).await?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Problem::bad_request(format!("the request body is not {what}: {e}")))
}
