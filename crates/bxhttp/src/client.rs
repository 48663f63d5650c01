//! Calling HTTP/1.1 over a Unix socket: connect, handshake, the connection driven on a task
//! that ends with its owner ([`AbortOnDropHandle`]), one request sent, and an answer's body
//! read within a byte cap. The kept connections of `pool` are built on it.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::net::UnixStream;
use tokio_util::task::AbortOnDropHandle;

/// Why a request got no answer, or its answer could not be read. `Connect` and `Handshake`
/// happen before anything is sent.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket could not be connected to.
    #[error("{}: {source}", socket.display())]
    Connect {
        /// The socket.
        socket: PathBuf,
        /// The OS's reason (its kind tells "not running" from "not allowed").
        source: io::Error,
    },
    /// The HTTP/1.1 handshake on a new connection failed.
    #[error("{0}")]
    Handshake(hyper::Error),
    /// The request could not be sent, or its answer's head never came.
    #[error("{0}")]
    Send(hyper::Error),
    /// The answer's body broke off.
    #[error("{0}")]
    Body(String),
    /// The answer's body was larger than the reader's cap.
    #[error("the answer is larger than {max_bytes} bytes")]
    TooLarge {
        /// The cap, in bytes.
        max_bytes: usize,
    },
}

/// What a request body must be for hyper's client to send it (on its connection task).
pub trait SendBody:
    Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

impl<B> SendBody for B where
    B: Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + 'static
{
}

/// One open HTTP/1.1 connection: its sender, and the task driving it, aborted (closing the
/// socket) when this and every answer body it gave are dropped.
pub struct Connection<B> {
    pub(crate) sender: SendRequest<B>,
    driver: AbortOnDropHandle<()>,
}

impl<B> std::fmt::Debug for Connection<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("closed", &self.sender.is_closed())
            .finish()
    }
}

/// Connects to `socket`.
pub async fn connect(socket: &Path) -> Result<UnixStream, ClientError> {
    UnixStream::connect(socket)
        .await
        .map_err(|source| ClientError::Connect {
            socket: socket.to_path_buf(),
            source,
        })
}

impl<B: SendBody> Connection<B> {
    /// Connects to `socket` and shakes hands; the connection is driven on the current runtime.
    pub async fn open(socket: &Path) -> Result<Connection<B>, ClientError> {
        Connection::handshake(connect(socket).await?).await
    }

    /// Shakes hands on `stream`, already connected; the connection is driven on the current
    /// runtime.
    pub async fn handshake(stream: UnixStream) -> Result<Connection<B>, ClientError> {
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(ClientError::Handshake)?;
        let driver = AbortOnDropHandle::new(tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a client connection ended");
            }
        }));
        Ok(Connection { sender, driver })
    }

    /// Whether the server closed it (or it broke): nothing more can be sent on it.
    pub fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Sends `request` as the connection's last: the answer's head, and its body, which keeps
    /// the connection open until it is read or dropped.
    pub async fn send(mut self, request: Request<B>) -> Result<Response<AnswerBody>, ClientError> {
        let response = self
            .sender
            .send_request(request)
            .await
            .map_err(ClientError::Send)?;
        let driver = self.driver;
        Ok(response.map(|inner| AnswerBody {
            inner,
            _driver: driver,
        }))
    }
}

/// Sends `request` on a new connection to `socket`: the answer's head and its body (which
/// holds the connection until it is dropped).
pub async fn send<B: SendBody>(
    socket: &Path,
    request: Request<B>,
) -> Result<Response<AnswerBody>, ClientError> {
    Connection::open(socket).await?.send(request).await
}

/// Reads `body` whole, at most `max_bytes` of it.
pub async fn read_body<T>(body: T, max_bytes: usize) -> Result<Bytes, ClientError>
where
    T: Body,
    T::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    match Limited::new(body, max_bytes).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            Err(ClientError::TooLarge { max_bytes })
        }
        Err(e) => Err(ClientError::Body(e.to_string())),
    }
}

/// An answer's body from [`send`] or [`Connection::send`]: hyper's, holding the connection's
/// driver so the body streams for as long as the reader keeps it (an event stream).
#[derive(Debug)]
pub struct AnswerBody {
    inner: Incoming,
    _driver: AbortOnDropHandle<()>,
}

impl Body for AnswerBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
