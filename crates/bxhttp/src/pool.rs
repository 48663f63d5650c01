//! Kept-open HTTP/1 connections to one Unix socket, and the one rule for sending on them: a
//! request goes out at most once (loopd's connections to brokerd).
//!
//! A connection per call cost a connect, a handshake and the server's peer check each time
//! (about half of a call's round trip to brokerd), so connections are kept and reused, one
//! request at a time each, at most [`MAX_IDLE_CONNECTIONS`] of them idle (loopd's turns run
//! concurrently: the main and background slots, subagents). The server closes idle ones (its
//! `header_read_timeout_ms`), a restart closes all of them, so a kept connection may be dead
//! when it is picked. Such a request is sent again on another connection only when it provably
//! did not reach the server: hyper gave it back unsent (`TrySendError::take_message`), or
//! writing it on a kept connection failed with EPIPE (the server had closed it before hyper saw
//! the close). One that may have reached the server is never resent, since a tool such as
//! `write_file` would run twice: that request fails as [`SendError::Lost`] instead. The one
//! exception is a `GET` or `HEAD` (the catalogue, health): it asks for nothing to be done
//! (RFC 9110, 9.2.2), so one lost on a kept connection (the server closed it to make room at
//! its cap, or for being idle, as the request went out) is sent once more on another.
//!
//! Each new connection notes the process that answered it ([`Servers`]): loopd tells brokerd
//! by these, its own connections, rather than by whatever brokerd's socket path leads to.

use crate::client::{Connection, connect, read_body};
use crate::pidfd::Pinned;
use crate::servers::{Servers, ServersError};
use bytes::Bytes;
use http_body_util::Full;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The most connections to one socket kept open while idle; more are open only while more
/// requests are in flight, and are closed when their answer is read.
pub const MAX_IDLE_CONNECTIONS: usize = 4;
/// A connection idle longer than this, in milliseconds, is closed rather than reused: well
/// below brokerd's default `header_read_timeout_ms` (10 000), so a request is not sent on a
/// connection at the moment the server closes it (a request lost that way could not be told
/// from one the server received, and would fail).
pub const MAX_IDLE_MS: u64 = 5_000;

/// A request sent through a [`Pool`].
pub type Request = hyper::Request<Full<Bytes>>;

/// A whole answer read through a [`Pool`].
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The header fields.
    pub headers: hyper::HeaderMap,
    /// The body, whole.
    pub body: Bytes,
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Nothing was sent: no connection could be made.
    #[error("{0}")]
    NotConnected(String),
    /// The request may have reached the server, or its answer broke off: never send it again.
    #[error("{0}")]
    Lost(String),
}

/// One kept connection and since when it waits for a request.
struct Kept {
    connection: Connection<Full<Bytes>>,
    idle_since: Instant,
}

impl Kept {
    /// Opens a connection to `socket`, notes in `servers` the process that answered it, and
    /// starts its driver on the current runtime.
    async fn open(socket: &Path, servers: &Servers) -> Result<Kept, SendError> {
        let stream = connect(socket)
            .await
            .map_err(|e| SendError::NotConnected(e.to_string()))?;
        servers.note(Pinned::peer_of(&stream), socket);
        let connection = Connection::handshake(stream)
            .await
            .map_err(|e| SendError::NotConnected(e.to_string()))?;
        Ok(Kept {
            connection,
            idle_since: Instant::now(),
        })
    }

    /// Whether it may be picked: open, and not idle so long that brokerd may be closing it.
    fn usable(&self) -> bool {
        !self.connection.is_closed()
            && self.idle_since.elapsed() < Duration::from_millis(MAX_IDLE_MS)
    }
}

/// The idle connections to one socket, shared by every clone.
#[derive(Clone)]
pub struct Pool {
    socket: PathBuf,
    server: &'static str,
    idle: Arc<Mutex<Vec<Kept>>>,
    servers: Arc<Servers>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).len();
        f.debug_struct("Pool")
            .field("socket", &self.socket)
            .field("idle", &idle)
            .finish()
    }
}

impl Pool {
    /// A pool of connections to `socket`, where `server` (e.g. `brokerd`) answers: its name
    /// is in the errors.
    pub fn new(socket: PathBuf, server: &'static str) -> Pool {
        Pool {
            socket,
            server,
            idle: Arc::default(),
            servers: Arc::default(),
        }
    }

    /// The running processes that answered this pool's connections (the server, and any
    /// process that took its path over since): none until a connection was made.
    pub fn servers(&self) -> Result<Vec<Arc<Pinned>>, ServersError> {
        self.servers.running()
    }

    /// [`Pool::servers`], making a connection (kept for the next request) when none of them
    /// runs; `Err` says why none could be made or none runs.
    pub async fn reach_servers(&self) -> Result<Vec<Arc<Pinned>>, String> {
        match self.servers.running() {
            Err(ServersError::NoneRunning) => {}
            known => return known.map_err(|e| e.to_string()),
        }
        let kept = Kept::open(&self.socket, &self.servers)
            .await
            .map_err(|e| e.to_string())?;
        self.keep(kept);
        self.servers.running().map_err(|e| e.to_string())
    }

    /// The socket it connects to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The most recently used idle connection that may be picked; the dead and stale ones
    /// found on the way are closed.
    fn take(&self) -> Option<Kept> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(connection) = idle.pop() {
            if connection.usable() {
                return Some(connection);
            }
        }
        None
    }

    /// Keeps `connection` for the next request, unless it is closed or the pool is full.
    fn keep(&self, mut connection: Kept) {
        if connection.connection.is_closed() {
            return;
        }
        connection.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE_CONNECTIONS {
            idle.push(connection);
        }
    }

    /// Sends `request` and reads the whole answer (at most `max_bytes` of body): on a kept
    /// connection when one is open, else on a new one. A request hyper gives back unsent, and
    /// a `GET` or `HEAD` lost on a kept connection, is sent on the next connection; every kept
    /// connection is tried at most once, and a new one ends the tries either way.
    pub async fn send(&self, mut request: Request, max_bytes: usize) -> Result<Answer, SendError> {
        for tries in 0..=MAX_IDLE_CONNECTIONS {
            let kept = if tries < MAX_IDLE_CONNECTIONS {
                self.take()
            } else {
                None
            };
            let fresh = kept.is_none();
            let mut connection = match kept {
                Some(connection) => connection,
                None => Kept::open(&self.socket, &self.servers).await?,
            };
            // A connection that ended (brokerd closed it, restarted) is found here, before
            // anything is sent on it.
            if let Err(e) = connection.connection.sender.ready().await {
                if fresh {
                    return Err(SendError::NotConnected(format!(
                        "{} closed a new connection: {e}",
                        self.server
                    )));
                }
                continue;
            }
            // Kept for the cases where a request consumed on a kept connection may go out
            // again: one that provably did not reach the server (its write failed with EPIPE),
            // and a request that asks for nothing to be done, whatever became of it.
            let copy = (!fresh).then(|| copy_of(&request));
            let safe = is_safe(request.method());
            let response = match connection.connection.sender.try_send_request(request).await {
                Ok(response) => response,
                Err(mut e) => {
                    let unsent = e.take_message();
                    let error = e.into_error();
                    match (unsent, copy) {
                        (Some(unsent), _) if !fresh => {
                            tracing::debug!(server = self.server, %error, "a kept connection had closed; sending on another");
                            request = unsent;
                            continue;
                        }
                        (Some(_), _) => {
                            return Err(SendError::NotConnected(format!(
                                "{} closed a new connection: {error}",
                                self.server
                            )));
                        }
                        (None, Some(copy)) if safe || never_delivered(&error) => {
                            tracing::debug!(server = self.server, %error, "a kept connection closed under a request that may go out again; sending on another");
                            request = copy;
                            continue;
                        }
                        (None, _) => return Err(SendError::Lost(error.to_string())),
                    }
                }
            };
            let (head, body) = response.into_parts();
            let body = match (read_body(body, max_bytes).await, copy) {
                (Ok(body), _) => body,
                (Err(error), Some(copy)) if safe => {
                    tracing::debug!(server = self.server, %error, "an answer broke off on a kept connection; asking again on another");
                    request = copy;
                    continue;
                }
                (Err(error), _) => return Err(SendError::Lost(error.to_string())),
            };
            self.keep(connection);
            return Ok(Answer {
                status: head.status.as_u16(),
                headers: head.headers,
                body,
            });
        }
        Err(SendError::NotConnected(format!(
            "no connection to {}",
            self.server
        )))
    }
}

/// A copy of `request` to send again: its method, URI, version, headers and body (the body's
/// bytes are shared, not copied).
fn copy_of(request: &Request) -> Request {
    let mut copy = hyper::Request::new(request.body().clone());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    copy
}

/// Whether a request of `method` asks for nothing to be done, so that sending it twice is
/// the same as sending it once (RFC 9110, 9.2.1).
fn is_safe(method: &hyper::Method) -> bool {
    method == hyper::Method::GET || method == hyper::Method::HEAD
}

/// Whether `error` proves the request never reached the server whole: writing it failed with
/// EPIPE, which a Unix socket answers only once its peer has closed, so the server cannot have
/// read the rest of the request, and no server acts on part of one. This is the race of a kept
/// connection the server closed (idle timeout, restart) just as it was picked, before hyper
/// saw the close; any other failure may have come after the server read the whole request.
fn never_delivered(error: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.kind() == std::io::ErrorKind::BrokenPipe;
        }
        source = e.source();
    }
    false
}
