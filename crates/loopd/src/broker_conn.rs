//! loopd's kept-open HTTP/1 connections to brokerd, and the one rule for sending on them: a
//! request goes out at most once.
//!
//! A connection per call cost a connect, a handshake and brokerd's peer check each time (about
//! half of a call's round trip), so connections are kept and reused, one request at a time
//! each, at most [`MAX_IDLE_CONNECTIONS`] of them idle (turns run concurrently: the main and
//! background slots, subagents). brokerd closes idle ones (its `header_read_timeout_ms`), a
//! restart closes all of them, so a kept connection may be dead when it is picked. Such a
//! request is sent again on another connection only when hyper gave it back unsent
//! (`TrySendError::take_message`); one that may have reached brokerd is never resent, since a
//! tool such as `write_file` would run twice: that call fails as unavailable instead.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::task::AbortOnDropHandle;

/// The most connections to brokerd kept open while idle; more are open only while more
/// requests are in flight, and are closed when their answer is read.
pub const MAX_IDLE_CONNECTIONS: usize = 4;
/// A connection idle longer than this, in milliseconds, is closed rather than reused: well
/// below brokerd's default `header_read_timeout_ms` (10 000), so loopd does not send on a
/// connection at the moment brokerd closes it (a request lost that way could not be told from
/// one brokerd received, and would fail its call).
pub const MAX_IDLE_MS: u64 = 5_000;

/// A request to brokerd.
pub(crate) type Request = hyper::Request<Full<Bytes>>;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// Nothing was sent: no connection could be made.
    #[error("{0}")]
    NotConnected(String),
    /// The request may have reached brokerd, or its answer broke off: never send it again.
    #[error("{0}")]
    Lost(String),
}

/// One open connection: its sender, and the task driving it (aborted when this is dropped,
/// which closes the socket).
struct Connection {
    sender: SendRequest<Full<Bytes>>,
    _driver: AbortOnDropHandle<()>,
    idle_since: Instant,
}

impl Connection {
    /// Opens a connection to `socket` and starts its driver on the current runtime.
    async fn open(socket: &Path) -> Result<Connection, SendError> {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|e| SendError::NotConnected(format!("{}: {e}", socket.display())))?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| SendError::NotConnected(e.to_string()))?;
        let driver = AbortOnDropHandle::new(tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "a connection to brokerd ended");
            }
        }));
        Ok(Connection {
            sender,
            _driver: driver,
            idle_since: Instant::now(),
        })
    }

    /// Whether it may be picked: open, and not idle so long that brokerd may be closing it.
    fn usable(&self) -> bool {
        !self.sender.is_closed() && self.idle_since.elapsed() < Duration::from_millis(MAX_IDLE_MS)
    }
}

/// The idle connections to one brokerd socket, shared by every clone of a `Broker`.
#[derive(Clone, Default)]
pub(crate) struct Pool {
    idle: Arc<Mutex<Vec<Connection>>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).len();
        f.debug_struct("Pool").field("idle", &idle).finish()
    }
}

impl Pool {
    /// The most recently used idle connection that may be picked; the dead and stale ones
    /// found on the way are closed.
    fn take(&self) -> Option<Connection> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(connection) = idle.pop() {
            if connection.usable() {
                return Some(connection);
            }
        }
        None
    }

    /// Keeps `connection` for the next request, unless it is closed or the pool is full.
    fn keep(&self, mut connection: Connection) {
        if connection.sender.is_closed() {
            return;
        }
        connection.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE_CONNECTIONS {
            idle.push(connection);
        }
    }

    /// Sends `request` to brokerd at `socket` and reads the whole answer (at most `max_bytes`
    /// of body): on a kept connection when one is open, else on a new one. A request hyper
    /// gives back unsent is sent on the next connection; every kept connection is tried at
    /// most once, and a new one ends the tries either way.
    pub(crate) async fn send(
        &self,
        socket: &Path,
        mut request: Request,
        max_bytes: usize,
    ) -> Result<(u16, Bytes), SendError> {
        for tries in 0..=MAX_IDLE_CONNECTIONS {
            let kept = if tries < MAX_IDLE_CONNECTIONS {
                self.take()
            } else {
                None
            };
            let fresh = kept.is_none();
            let mut connection = match kept {
                Some(connection) => connection,
                None => Connection::open(socket).await?,
            };
            // A connection that ended (brokerd closed it, restarted) is found here, before
            // anything is sent on it.
            if let Err(e) = connection.sender.ready().await {
                if fresh {
                    return Err(SendError::NotConnected(format!(
                        "brokerd closed a new connection: {e}"
                    )));
                }
                continue;
            }
            let response = match connection.sender.try_send_request(request).await {
                Ok(response) => response,
                Err(mut e) => match e.take_message() {
                    Some(unsent) if !fresh => {
                        tracing::debug!(error = %e.into_error(), "a kept connection to brokerd had closed; sending on another");
                        request = unsent;
                        continue;
                    }
                    Some(_) => {
                        return Err(SendError::NotConnected(format!(
                            "brokerd closed a new connection: {}",
                            e.into_error()
                        )));
                    }
                    None => return Err(SendError::Lost(e.into_error().to_string())),
                },
            };
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), max_bytes)
                .collect()
                .await
                .map_err(|e| SendError::Lost(e.to_string()))?
                .to_bytes();
            self.keep(connection);
            return Ok((status, body));
        }
        Err(SendError::NotConnected("no connection to brokerd".into()))
    }
}
