//! One HTTP/1.1 exchange with llama-server over TCP (plain, or TLS for `https://`) or a Unix
//! socket: connect (bounded), send, and the answer's status and body. One connection per
//! request, closed when the [`Exchange`] is dropped.
//!
//! Nothing here logs a request's or an answer's body: they hold the prompt and the answer.

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
use super::options::ClientOptions;
use super::tls::{self, TlsOptions};
use rustls::pki_types::ServerName;
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

/// A connection ready for one request, and the task driving it.
type Connection = (SendRequest<Full<Bytes>>, AbortOnDropHandle<()>);

async fn handshake<IO>(endpoint: &Endpoint, io: IO) -> Result<Connection, InferError>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| connect_error(endpoint, format!("HTTP handshake: {e}")))?;
    let task = tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("llama-server connection ended with an error: {e}");
        }
    });
    Ok((sender, AbortOnDropHandle::new(task)))
}

/// Connects to `endpoint` (TCP, then TLS for https, or a Unix socket) and does the HTTP
/// handshake.
async fn connect(endpoint: &Endpoint, tls: Option<&TlsOptions>) -> Result<Connection, InferError> {
    let io_error = |e: std::io::Error| connect_error(endpoint, e.to_string());
    match endpoint {
        Endpoint::Tcp {
            host,
            port,
            tls: secure,
            ..
        } => {
            let stream = TcpStream::connect((host.as_str(), *port))
                .await
                .map_err(io_error)?;
            stream.set_nodelay(true).map_err(io_error)?;
            if !*secure {
                return handshake(endpoint, stream).await;
            }
            let Some(tls) = tls else {
                return Err(InferError::BadConfig {
                    message: format!("{endpoint} is https but the client has no TLS settings"),
                });
            };
            // SNI and the certificate's name: the URL's host (an IP address is checked
            // against the certificate's IP addresses, and sent without SNI).
            let name = ServerName::try_from(host.clone()).map_err(|_| InferError::BadConfig {
                message: format!("{host:?} is not a host name TLS can check a certificate for"),
            })?;
            let stream = tokio_rustls::TlsConnector::from(tls.config())
                .connect(name, stream)
                .await
                .map_err(|e| tls::handshake_error(endpoint.to_string(), &e))?;
            handshake(endpoint, stream).await
        }
        Endpoint::Unix { path } => {
            let stream = UnixStream::connect(path).await.map_err(io_error)?;
            handshake(endpoint, stream).await
        }
    }
}

/// Connects (TCP or Unix socket, the TLS handshake and the HTTP handshake all within
/// `options.connect_timeout_ms`), sends `outgoing` and waits (at most `head_timeout_ms`, else
/// [`InferError::Stalled`]) for the answer's head. Failing to connect (a certificate not
/// accepted included), or a connection closed before any byte of an answer, is
/// [`InferError::Connect`].
pub async fn send(
    options: &ClientOptions,
    head_timeout_ms: u64,
    outgoing: Outgoing<'_>,
) -> Result<Exchange, InferError> {
    let endpoint = &options.endpoint;
    let connect_timeout_ms = options.connect_timeout_ms;
    let request = build(endpoint, outgoing)?;
    let connected = tokio::time::timeout(
        Duration::from_millis(connect_timeout_ms),
        connect(endpoint, options.tls.as_ref()),
    )
    .await;
    let (mut sender, connection) = match connected {
        Err(_) => {
            return Err(connect_error(
                endpoint,
                format!("no connection within {connect_timeout_ms} ms"),
            ));
        }
        Ok(connected) => connected?,
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
