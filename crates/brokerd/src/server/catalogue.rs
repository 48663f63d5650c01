//! The answer to `GET /v1/catalogue?session=ID`, with the catalogue's version as its `ETag`:
//! a client that sends the version it holds in `If-None-Match` gets `304 Not Modified` and no
//! body while the catalogue is unchanged (loopd asks at every turn, and keeps what it got).
//!
//! The version is a digest of the answer's bytes, so anything that changes the catalogue (a
//! grant, an MCP server's tools, a secret redacted from a description) changes it, with no
//! list of causes to keep up to date.

use super::routes::Body;
use bxhttp::answer::json;
use bytes::Bytes;
use http::header::{CONTENT_TYPE, ETAG, HeaderValue, IF_NONE_MATCH};
use http::{HeaderMap, Response, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use proto::Catalogue;
use sha2::{Digest, Sha256};

/// How many bytes of the SHA-256 of the answer make its version (hex doubles them): enough
/// that two catalogues of one session never share one by chance.
const VERSION_BYTES: usize = 16;

/// `catalogue` as an answer to a request with `headers`: 200 with the catalogue and its
/// `ETag`, or 304 with only the `ETag` when the request's `If-None-Match` names it.
pub(super) fn answer(catalogue: &Catalogue, headers: &HeaderMap) -> Response<Body> {
    let bytes = match serde_json::to_vec(catalogue) {
        Ok(bytes) => bytes,
        // `json` answers 500 with the reason.
        Err(_) => return json(StatusCode::OK, catalogue),
    };
    let etag = version(&bytes);
    let (status, body) = if names(headers, &etag) {
        (StatusCode::NOT_MODIFIED, Empty::new().boxed())
    } else {
        (StatusCode::OK, Full::new(Bytes::from(bytes)).boxed())
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let fields = response.headers_mut();
    fields.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        fields.insert(ETAG, value);
    }
    response
}

/// The version of an answer of `bytes`, quoted as an `ETag` is.
fn version(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    format!("\"{}\"", hex::encode(&digest[..VERSION_BYTES]))
}

/// Whether the request's `If-None-Match` names `etag` (or is `*`); a weak tag (`W/"..."`)
/// counts, as RFC 9110 asks of `If-None-Match`.
fn names(headers: &HeaderMap, etag: &str) -> bool {
    headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|list| list.split(','))
        .map(str::trim)
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use bxcore::SessionId;

    fn catalogue(session: &str) -> Catalogue {
        Catalogue {
            session: SessionId::new(session).unwrap(),
            tools: Vec::new(),
        }
    }

    fn asking(tags: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(IF_NONE_MATCH, HeaderValue::from_str(tags).unwrap());
        headers
    }

    fn etag(response: &Response<Body>) -> String {
        response.headers()[ETAG].to_str().unwrap().to_owned()
    }

    #[test]
    fn the_version_held_gets_304_and_another_gets_the_catalogue() {
        let first = answer(&catalogue("a"), &HeaderMap::new());
        assert_eq!(first.status(), StatusCode::OK);
        let tag = etag(&first);
        assert_eq!(tag.len(), 2 + 2 * VERSION_BYTES, "{tag}");
        for held in [
            tag.clone(),
            format!("W/{tag}"),
            format!("\"x\", {tag}"),
            "*".into(),
        ] {
            let again = answer(&catalogue("a"), &asking(&held));
            assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{held}");
            assert_eq!(etag(&again), tag);
        }
        // Another catalogue (here another session's) has another version.
        let other = answer(&catalogue("b"), &asking(&tag));
        assert_eq!(other.status(), StatusCode::OK);
        assert_ne!(etag(&other), tag);
    }
}
