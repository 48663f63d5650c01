//! One HTTP/1.1 exchange with llama-server over TCP (plain, or TLS for `https://`) or a Unix
//! socket: connect (bounded), send, and the answer's status and body. On a connection kept
//! from an earlier exchange when one waits ([`Kept`]), else a new one; an exchange's
//! connection goes back once its answer was read to the end ([`Reusable::keep`]), and is
//! closed when the [`Exchange`] is dropped otherwise. TCP connections acknowledge at once
//! ([`QuickAck`]), so a kept one does not wait on the server's Nagle.
//!
//! Nothing here logs a request's or an answer's body: they hold the prompt and the answer.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpStream, UnixStream};

use super::endpoint::Endpoint;
use super::error::InferError;
use super::kept::{Connection, Kept};
use super::options::ClientOptions;
use super::quickack::QuickAck;
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

/// The answer's head and body, and the connection they came on.
#[derive(Debug)]
pub struct Exchange {
    /// The HTTP status.
    pub status: u16,
    /// The body, read frame by frame.
    pub body: Incoming,
    /// The connection: closed when dropped (e.g. on cancel), kept when its answer was read.
    pub connection: Reusable,
}

/// An exchange's connection, and the kept connections it goes back to.
#[derive(Debug)]
pub struct Reusable {
    connection: Connection,
    kept: Kept,
}

impl Reusable {
    /// Gives the connection back for the next request. Only once the answer's body was read
    /// to its end: hyper cannot send on a connection whose answer is still coming.
    pub fn keep(self) {
        self.kept.put(self.connection);
    }
}

fn connect_error(endpoint: &Endpoint, message: String) -> InferError {
    InferError::Connect {
        url: endpoint.to_string(),
        message,
    }
}

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
    Ok(Connection {
        sender,
        _driver: AbortOnDropHandle::new(task),
    })
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
            let stream = QuickAck::new(stream);
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

/// Sends `outgoing` and waits (at most `head_timeout_ms`, else [`InferError::Stalled`]) for
/// the answer's head: on a connection `kept` holds when one waits, else on a new one (TCP or
/// Unix socket, the TLS handshake and the HTTP handshake all within
/// `options.connect_timeout_ms`). A request a kept connection's close lost before any answer
/// is sent once more on a new connection. Failing to connect (a certificate not accepted
/// included), or a new connection closed before any byte of an answer, is
/// [`InferError::Connect`].
pub async fn send(
    options: &ClientOptions,
    kept: &Kept,
    head_timeout_ms: u64,
    outgoing: Outgoing<'_>,
) -> Result<Exchange, InferError> {
    let endpoint = &options.endpoint;
    let request = build(endpoint, outgoing)?;
    if let Some(connection) = kept.take() {
        match ask(connection, copy_of(&request), head_timeout_ms).await {
            Ok((status, body, connection)) => return Ok(exchange(status, body, connection, kept)),
            Err(Asked::Lost(why)) => {
                tracing::debug!(url = %endpoint, "a kept connection closed under the request ({why}); sending it on a new one");
            }
            Err(Asked::Failed(e)) => return Err(e),
        }
    }
    let connect_timeout_ms = options.connect_timeout_ms;
    let connected = tokio::time::timeout(
        Duration::from_millis(connect_timeout_ms),
        connect(endpoint, options.tls.as_ref()),
    )
    .await;
    let connection = match connected {
        Err(_) => {
            return Err(connect_error(
                endpoint,
                format!("no connection within {connect_timeout_ms} ms"),
            ));
        }
        Ok(connected) => connected?,
    };
    match ask(connection, request, head_timeout_ms).await {
        Ok((status, body, connection)) => Ok(exchange(status, body, connection, kept)),
        Err(Asked::Lost(why)) => Err(connect_error(
            endpoint,
            format!("the connection closed before an answer ({why})"),
        )),
        Err(Asked::Failed(e)) => Err(e),
    }
}

fn exchange(status: u16, body: Incoming, connection: Connection, kept: &Kept) -> Exchange {
    Exchange {
        status,
        body,
        connection: Reusable {
            connection,
            kept: kept.clone(),
        },
    }
}

/// Why a request on a connection got no answer.
enum Asked {
    /// The connection closed before any byte of an answer came.
    Lost(String),
    /// Anything else: no answer in time, or not an HTTP answer.
    Failed(InferError),
}

/// Sends `request` on `connection` and waits at most `head_timeout_ms` for the answer's head.
async fn ask(
    mut connection: Connection,
    request: Request<Full<Bytes>>,
    head_timeout_ms: u64,
) -> Result<(u16, Incoming, Connection), Asked> {
    let head = tokio::time::timeout(Duration::from_millis(head_timeout_ms), async {
        connection.sender.ready().await?;
        connection.sender.send_request(request).await
    });
    let Ok(answered) = head.await else {
        return Err(Asked::Failed(InferError::Stalled {
            after_ms: head_timeout_ms,
        }));
    };
    match answered {
        Ok(response) => {
            let status = response.status().as_u16();
            Ok((status, response.into_body(), connection))
        }
        Err(e) if e.is_parse() || e.is_parse_status() => {
            Err(Asked::Failed(InferError::BadResponse {
                message: format!("not an HTTP answer ({e})"),
            }))
        }
        Err(e) => Err(Asked::Lost(e.to_string())),
    }
}

/// A copy of `request` to send again (the body's bytes are shared, not copied).
fn copy_of(request: &Request<Full<Bytes>>) -> Request<Full<Bytes>> {
    let mut copy = Request::new(request.body().clone());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    copy
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

/// Reads `exchange`'s whole body (at most `max_bytes`), then gives its connection back; its
/// status and body.
pub async fn read_answer(exchange: Exchange, max_bytes: usize) -> Result<(u16, Bytes), InferError> {
    let Exchange {
        status,
        body,
        connection,
    } = exchange;
    let body = read_body(body, max_bytes).await?;
    connection.keep();
    Ok((status, body))
}
