//! Connections to one model server kept open between requests, shared by a client's clones:
//! a turn's model calls, and the start's `/health` and `/props`, go out on one connection
//! instead of a connect (and a TLS handshake, for `https://`) each. Over TCP they acknowledge
//! at once (`quickack`), so that a reused one does not wait on the server's Nagle.
//!
//! A connection goes back only once its answer was read to its end (hyper can then send the
//! next request on it); one whose answer was cut, or left unread, is closed. At most
//! [`MAX_IDLE_MODEL_CONNECTIONS`] wait, none reused after [`MAX_IDLE_MODEL_MS`] idle (below
//! the few seconds a server such as llama-server keeps an idle connection). A request that a
//! kept connection's close lost before any answer came is sent once more on a new connection
//! (`transport::send`): a model call asks for text, and sending it again asks for the same.

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::SendRequest;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::task::AbortOnDropHandle;

/// The most connections to one model server kept open while idle.
pub const MAX_IDLE_MODEL_CONNECTIONS: usize = 16;
/// A connection idle longer than this, in milliseconds, is closed rather than reused.
pub const MAX_IDLE_MODEL_MS: u64 = 2_000;

/// One connection: its sender and the task driving it.
#[derive(Debug)]
pub struct Connection {
    pub(super) sender: SendRequest<Full<Bytes>>,
    /// Held only to stop the task when the connection is dropped.
    pub(super) _driver: AbortOnDropHandle<()>,
}

/// An idle connection and since when.
#[derive(Debug)]
struct Idle {
    connection: Connection,
    since: Instant,
}

/// The idle connections to one endpoint; clones share them.
#[derive(Debug, Clone, Default)]
pub struct Kept(Arc<Mutex<Vec<Idle>>>);

impl Kept {
    /// The most recently used idle connection that may be used; closed and stale ones found
    /// on the way are dropped.
    pub fn take(&self) -> Option<Connection> {
        let mut idle = self.0.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(Idle { connection, since }) = idle.pop() {
            let fresh = since.elapsed() < Duration::from_millis(MAX_IDLE_MODEL_MS);
            if fresh && !connection.sender.is_closed() {
                return Some(connection);
            }
        }
        None
    }

    /// Keeps `connection` for the next request, unless it is closed or enough wait.
    pub fn put(&self, connection: Connection) {
        if connection.sender.is_closed() {
            return;
        }
        let mut idle = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE_MODEL_CONNECTIONS {
            idle.push(Idle {
                connection,
                since: Instant::now(),
            });
        }
    }
}
