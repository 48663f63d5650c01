//! Request bodies: an HTML form's fields or a script's JSON, read within [`MAX_FORM_BYTES`].

use super::MAX_FORM_BYTES;
use bytes::Bytes;
use http::{Request, header};
use http_body_util::{BodyExt, Limited};
use serde::de::DeserializeOwned;
use std::collections::HashMap;

/// Why a body could not be read, in words for the person who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Over [`MAX_FORM_BYTES`].
    #[error("the request is larger than the {MAX_FORM_BYTES} bytes the console reads")]
    TooLarge,
    /// The connection failed while it was read.
    #[error("cannot read the request: {0}")]
    Unreadable(String),
    /// Not what the route takes.
    #[error("{0}")]
    Malformed(String),
}

/// Reads the whole body, at most [`MAX_FORM_BYTES`] of it.
pub async fn read<B>(request: Request<B>) -> Result<Bytes, BodyError>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_FORM_BYTES as u64) {
        return Err(BodyError::TooLarge);
    }
    match Limited::new(request.into_body(), MAX_FORM_BYTES)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(BodyError::TooLarge)
        }
        Err(e) => Err(BodyError::Unreadable(e.to_string())),
    }
}

/// An `application/x-www-form-urlencoded` body's fields; a field given twice is refused, so
/// no field means two things.
pub fn fields(body: &[u8]) -> Result<HashMap<String, String>, BodyError> {
    let mut found = HashMap::new();
    for (name, value) in form_urlencoded::parse(body) {
        if found.insert(name.to_string(), value.into_owned()).is_some() {
            return Err(BodyError::Malformed(format!(
                "the form field {name:?} is given twice"
            )));
        }
    }
    Ok(found)
}

/// A JSON body, as a `T`.
pub fn json<T: DeserializeOwned>(body: &[u8]) -> Result<T, BodyError> {
    serde_json::from_slice(body).map_err(|e| BodyError::Malformed(format!("not valid: {e}")))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_are_decoded_and_a_repeated_one_is_refused() {
        let found = fields(b"text=a+%3Cb%3E&csrf=x").unwrap();
        assert_eq!(found["text"], "a <b>");
        assert_eq!(found["csrf"], "x");
        let twice = fields(b"csrf=a&csrf=b").unwrap_err().to_string();
        assert!(twice.contains("csrf"), "{twice}");
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_refused() {
        let big = vec![b'a'; MAX_FORM_BYTES + 1];
        let request = Request::new(http_body_util::Full::new(Bytes::from(big)));
        assert_eq!(read(request).await, Err(BodyError::TooLarge));
        let small = Request::new(http_body_util::Full::new(Bytes::from_static(b"ok")));
        assert_eq!(read(small).await.unwrap(), Bytes::from_static(b"ok"));
    }
}
