//! Request bodies: an HTML form's fields or a script's JSON, read within
//! `[web] max_body_bytes` (bxhttp's reader: 413 past it, by `Content-Length` and while
//! reading).

use bxhttp::Names;
use bxhttp::answer::Problem;
use bytes::Bytes;
use http::Request;
use serde::de::DeserializeOwned;
use std::collections::HashMap;

/// The console's words in bxhttp's errors: its body cap is `web.max_body_bytes`.
pub(super) const NAMES: Names = Names::new("loopd", "api.socket_group", "web");

/// Reads the whole body, at most `max_body_bytes` of it.
pub async fn read<B>(request: Request<B>, max_body_bytes: usize) -> Result<Bytes, Problem>
where
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    bxhttp::request::read_body(request, &NAMES, max_body_bytes).await
}

/// An `application/x-www-form-urlencoded` body's fields; a field given twice is refused, so
/// no field means two things.
pub fn fields(body: &[u8]) -> Result<HashMap<String, String>, Problem> {
    let mut found = HashMap::new();
    for (name, value) in form_urlencoded::parse(body) {
        if found.insert(name.to_string(), value.into_owned()).is_some() {
            return Err(Problem::bad_request(format!(
                "the form field {name:?} is given twice"
            )));
        }
    }
    Ok(found)
}

/// A JSON body, as a `T`.
pub fn json<T: DeserializeOwned>(body: &[u8]) -> Result<T, Problem> {
    serde_json::from_slice(body)
        .map_err(|e| Problem::bad_request(format!("the request body is not valid: {e}")))
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
        let twice = fields(b"csrf=a&csrf=b").unwrap_err();
        assert!(twice.message.contains("csrf"), "{twice:?}");
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_refused_naming_the_key() {
        let big = vec![b'a'; 2_000];
        let request = Request::new(http_body_util::Full::new(Bytes::from(big)));
        let refused = read(request, 1_024).await.unwrap_err();
        assert_eq!(refused.status, http::StatusCode::PAYLOAD_TOO_LARGE);
        assert!(
            refused.message.contains("web.max_body_bytes"),
            "{refused:?}"
        );
        let small = Request::new(http_body_util::Full::new(Bytes::from_static(b"ok")));
        assert_eq!(read(small, 1_024).await.unwrap(), Bytes::from_static(b"ok"));
    }
}
