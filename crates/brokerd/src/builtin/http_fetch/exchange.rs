//! One request and its response over one connection (HTTP/1.1, plain or TLS): what is sent
//! ([`Outgoing`]), the response with the task that drives its connection ([`Exchange`]), the
//! redirect a response asks for, and the body read up to the cap.

use super::Hop;
use super::target::Target;
use crate::builtin::files::text;
use crate::tool::{ToolError, ToolOutput};
use bytes::Bytes;
use http::header::{ACCEPT, HOST, LOCATION, USER_AGENT};
use http::{HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::sync::Arc;
use tokio_util::task::AbortOnDropHandle;

/// The `User-Agent` sent with every request.
const AGENT: &str = concat!("boxmaker-brokerd/", env!("CARGO_PKG_VERSION"));

/// What one hop sends besides its URL.
#[derive(Debug, Clone, Copy)]
pub(super) struct Outgoing<'a> {
    /// The method.
    pub method: &'a Method,
    /// The headers the grant attaches to this hop (none away from their origin).
    pub injected: &'a [(HeaderName, HeaderValue)],
    /// The headers the model set.
    pub asked: &'a [(HeaderName, HeaderValue)],
    /// The body, if any.
    pub body: Option<&'a str>,
}

/// A response, with the task that drives its connection (aborted when this is dropped).
pub(super) struct Exchange {
    /// The response, its body not read yet.
    pub response: Response<Incoming>,
    /// Aborted when this is dropped: a connection never outlives its call.
    _connection: AbortOnDropHandle<()>,
}

/// Sends `outgoing` for `target` over `io` (HTTP/1.1).
pub(super) async fn send<T>(
    io: T,
    target: &Target,
    outgoing: Outgoing<'_>,
    hop: Hop<'_>,
) -> Result<Exchange, ToolError>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    // hyper's message is its own words (its Display leaves out the cause).
    let failed =
        |e: hyper::Error| ToolError::Failed(format!("the request to {} failed: {e}", hop.url()));
    let (mut sender, connection) = hyper::client::conn::http1::handshake::<_, Full<Bytes>>(io)
        .await
        .map_err(failed)?;
    let connection = AbortOnDropHandle::new(tokio::spawn(async move {
        let _ = connection.await;
    }));
    let request = request(target, outgoing)
        .ok_or_else(|| ToolError::Failed(format!("cannot build a request for {}", hop.url())))?;
    let response = sender.send_request(request).await.map_err(failed)?;
    Ok(Exchange {
        response,
        _connection: connection,
    })
}

/// The request for `target`: `Accept: */*` unless a header replaces it, the grant's headers,
/// the model's, then `Host` and `User-Agent`, which are the tool's alone.
fn request(target: &Target, outgoing: Outgoing<'_>) -> Option<Request<Full<Bytes>>> {
    let body = outgoing
        .body
        .map_or_else(Bytes::new, |b| Bytes::copy_from_slice(b.as_bytes()));
    let mut request = Request::builder()
        .method(outgoing.method.clone())
        .uri(target.path_and_query.as_str())
        .body(Full::new(body))
        .ok()?;
    let headers = request.headers_mut();
    headers.insert(ACCEPT, HeaderValue::from_static("*/*"));
    for (name, value) in outgoing.injected.iter().chain(outgoing.asked) {
        headers.insert(name.clone(), value.clone());
    }
    headers.insert(HOST, HeaderValue::from_str(&target.authority).ok()?);
    headers.insert(USER_AGENT, HeaderValue::from_static(AGENT));
    Some(request)
}

/// The `Location` of a redirect that may be followed; `None` for any other response.
pub(super) fn redirect_location(response: &Response<Incoming>) -> Option<String> {
    let follow = matches!(
        response.status(),
        StatusCode::MOVED_PERMANENTLY
            | StatusCode::FOUND
            | StatusCode::SEE_OTHER
            | StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
    );
    let location = response.headers().get(LOCATION)?;
    follow.then(|| String::from_utf8_lossy(location.as_bytes()).into_owned())
}

/// Reads the body of `exchange` up to `cap` bytes (one more, to know it goes on) as text.
pub(super) async fn read_body(
    exchange: Exchange,
    hop: Hop<'_>,
    cap: usize,
) -> Result<ToolOutput, ToolError> {
    let limit = cap.saturating_add(1);
    let mut body = exchange.response.into_body();
    let mut bytes: Vec<u8> = Vec::new();
    while bytes.len() < limit {
        let Some(frame) = body.frame().await else {
            break;
        };
        let frame = frame.map_err(|e| {
            ToolError::Failed(format!("reading the body of {} failed: {e}", hop.url()))
        })?;
        if let Ok(data) = frame.into_data() {
            let room = limit - bytes.len();
            bytes.extend_from_slice(&data[..data.len().min(room)]);
        }
    }
    let (content, truncated) = text::capped_text(&bytes, cap);
    Ok(ToolOutput { content, truncated })
}

/// A TLS client configuration trusting `roots`, speaking HTTP/1.1.
pub(super) fn tls_config(
    roots: rustls::RootCertStore,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|builder| {
            let mut config = builder.with_root_certificates(roots).with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            Arc::new(config)
        })
        .map_err(|e| format!("TLS is not available: {e}"))
}

/// Why a TLS handshake failed, in rustls' words, except a certificate's problem, whose text
/// may quote the names the server's certificate holds: that is only said to be rejected.
pub(super) fn tls_why(e: &std::io::Error) -> String {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(_)) => {
            "the server's certificate was not accepted".to_string()
        }
        Some(other) => other.to_string(),
        None => e.kind().to_string(),
    }
}
