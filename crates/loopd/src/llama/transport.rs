//! One HTTP/1.1 exchange with llama-server over TCP or a Unix socket: connect (bounded),
//! send, and the answer's status and body. One connection per request, closed when the
//! [`Exchange`] is dropped.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};

use super::endpoint::Endpoint;
use super::error::InferError;
use tokio_util::task::AbortOnDropHandle;

/// The `User-Agent` sent.
const USER_AGENT: &str = concat!("loopd/", env!("CARGO_PKG_VERSION"));

/// A request about to be sent.
#[derive(Debug)]
pub struct Outgoing<'a> {
    /// GET or POST.
    pub method: Method,
    /// The API path, e.g. `/v1/chat/completions`.
    pub path: &'a str,
    /// The JSON body, for a POST.
    pub body: Option<Vec<u8>>,
    /// Ask for an event stream.
    pub event_stream: bool,
    /// The API key, sent as `Authorization: Bearer KEY`.
    pub api_key: Option<&'a str>,
}

/// The answer's head and body; the connection lives as long as this.
#[derive(Debug)]
pub struct Exchange {
    /// The HTTP status.
    pub status: u16,
    /// The body, read frame by frame.
    pub body: Incoming,
    /// Stops the task driving the connection when the exchange is dropped (e.g. on cancel).
    _connection: AbortOnDropHandle<()>,
}

fn connect_error(endpoint: &Endpoint, message: String) -> InferError {
    InferError::Connect {
        url: endpoint.to_string(),
        message,
    }
}

async fn handshake<IO>(io: IO) -> hyper::Result<(SendRequest<Full<Bytes>>, AbortOnDropHandle<()>)>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(io)).await?;
    let task = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("llama-server connection ended with an error: {e}");
        }
    });
    Ok((sender, AbortOnDropHandle::new(task)))
}

async fn connect(
    endpoint: &Endpoint,
) -> Result<hyper::Result<(SendRequest<Full<Bytes>>, AbortOnDropHandle<()>)>, std::io::Error> {
    Ok(match endpoint {
        Endpoint::Tcp { host, port, .. } => {
            let stream = TcpStream::connect((host.as_str(), *port)).await?;
            stream.set_nodelay(true)?;
            handshake(stream).await
        }
        Endpoint::Unix { path } => handshake(UnixStream::connect(path).await?).await,
    })
}

/// Connects (within `connect_timeout_ms`), sends `outgoing` and waits (at most
/// `head_timeout_ms`, else [`InferError::Stalled`]) for the answer's head. Failing to connect,
/// or a connection closed before any byte of an answer, is [`InferError::Connect`].
pub async fn send(
    endpoint: &Endpoint,
    connect_timeout_ms: u64,
    head_timeout_ms: u64,
    outgoing: Outgoing<'_>,
) -> Result<Exchange, InferError> {
    let request = build(endpoint, outgoing)?;
    let connected =
        tokio::time::timeout(Duration::from_millis(connect_timeout_ms), connect(endpoint)).await;
    let (mut sender, connection) = match connected {
        Err(_) => {
            return Err(connect_error(
                endpoint,
                format!("no connection within {connect_timeout_ms} ms"),
            ));
        }
        Ok(Err(e)) => return Err(connect_error(endpoint, e.to_string())),
        Ok(Ok(Err(e))) => return Err(connect_error(endpoint, format!("HTTP handshake: {e}"))),
        Ok(Ok(Ok(pair))) => pair,
    };
    let head = tokio::time::timeout(
        Duration::from_millis(head_timeout_ms),
        sender.send_request(request),
    );
    let Ok(answered) = head.await else {
        return Err(InferError::Stalled {
            after_ms: head_timeout_ms,
        });
    };
    match answered {
        Ok(response) => Ok(Exchange {
            status: response.status().as_u16(),
            body: response.into_body(),
            _connection: connection,
        }),
        Err(e) if e.is_parse() || e.is_parse_status() => Err(InferError::BadResponse {
            message: format!("not an HTTP answer ({e})"),
        }),
        Err(e) => Err(connect_error(
            endpoint,
            format!("the connection closed before an answer ({e})"),
        )),
    }
}

fn build(endpoint: &Endpoint, outgoing: Outgoing<'_>) -> Result<Request<Full<Bytes>>, InferError> {
    let mut builder = Request::builder()
        .method(outgoing.method)
        .uri(endpoint.target(outgoing.path))
        .header(header::HOST, endpoint.host_header())
        .header(header::USER_AGENT, USER_AGENT);
    if outgoing.event_stream {
        builder = builder.header(header::ACCEPT, "text/event-stream");
    }
    if let Some(key) = outgoing.api_key {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    let body = match outgoing.body {
        Some(body) => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            Full::new(Bytes::from(body))
        }
        None => Full::new(Bytes::new()),
    };
    builder.body(body).map_err(|e| InferError::BadConfig {
        message: format!("cannot build a request to llama-server ({e}); is the API key one line?"),
    })
}

/// Reads a whole (non-streamed) body of at most `max_bytes`.
pub async fn read_body(body: Incoming, max_bytes: usize) -> Result<Bytes, InferError> {
    match Limited::new(body, max_bytes).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) => Err(InferError::BadResponse {
            message: format!("cannot read the answer's body ({e}; at most {max_bytes} bytes)"),
        }),
    }
}
