//! HTTP/1.1 over a Unix socket, the one implementation for boxmaker's servers (loopd's API,
//! brokerd, boxd) and clients (loopd's broker port, boxctl, the tests); and the same accept
//! loop for the servers on a TCP port (loopd's web console, the metrics listeners):
//!
//! - [`socket`]: binding a daemon's socket (a stale one replaced, its mode and group);
//! - [`listener`]: what the loop serves on, a Unix socket or a TCP port;
//! - [`host`]: the names a request gives its server (`Host`), which a server on TCP checks
//!   against its own (DNS rebinding);
//! - [`peer`]: who may connect by user (`SO_PEERCRED`: root, the daemon's user, its group);
//! - [`pidfd`]: a process held by its pidfd (a socket's peer, or the server a client reached),
//!   so that a reused pid is never taken for it; [`servers`]: the processes that answered a
//!   client's connections to one socket;
//! - [`answer`] and [`request`]: the one error body format ([`proto::api::ApiError`]), JSON
//!   answers, the 403/503/400 answers before the routes, request bodies within a byte cap;
//! - [`serve`]: the accept loop with its connection limits and the graceful drain (and,
//!   inside, the answers on a connection that is then closed, lingering);
//! - [`client`]: connect, handshake, send one request, read a body within a cap;
//! - [`pool`]: kept connections to one socket that send a request at most once.
//!
//! Where the words differ by daemon (its name, its config keys) they come from its [`Names`].
//!
//! A daemon brings a [`Handler`]: its peer check, its routes, and its [`Names`] for the words
//! of the error bodies it gives a refused peer (403) and a full server (503). [`serve`] does
//! the rest:
//!
//! - at most [`Limits::max_connections`] open connections. At the cap the loop still accepts.
//!   A newcomer whose request has come (bytes wait in its socket) gets room made for it, by
//!   asking the oldest connection that may go to close: first one with no
//!   request in flight (a head arriving slowly, idle between requests, or silent for
//!   [`FIRST_BYTE_GRACE_MS`] since it opened), then one whose request waits on a peer that
//!   has moved no byte for [`SLOW_PEER_QUIET_MS`] (a body not all sent, an answer not read).
//!   A connection that just opened and has sent nothing yet is never closed: in a burst its
//!   request is on its way or already in its socket, and closing the socket under it would
//!   reset the client. The connection's own task closes it (an idle keep-alive one through
//!   hyper's graceful shutdown, so the end of its last answer still goes out); one that read
//!   a request since the loop looked, or whose next request waits unread in its socket (the
//!   client sent it as the loop chose; closing would reset it, and the client could not tell
//!   whether it ran), stays and counts again. A silent newcomer makes no room
//!   (a flood of silent connections cannot push the others out): it waits up to
//!   [`FIRST_BYTE_GRACE_MS`] for its first bytes, then is looked at again, or closed
//!   unanswered if none came. When none may go, the new connection's request head is read
//!   and answered with the handler's 503 and `Retry-After` ([`OVERLOAD_RETRY_AFTER_S`]);
//!   [`MAX_OVERLOAD_ANSWERS`] connections past the cap are waited on or answered at once;
//!   past that the loop waits, and new clients wait in the listen backlog, set to the most
//!   the kernel allows. Every connection answered and closed (the 503, a refused peer's 403) is
//!   shut on the server's side and read until the peer closes ([`LINGER_MS`]), so a request
//!   body left unread does not turn the close into a reset: a client gets an answer or a
//!   plain close, never a reset.
//! - [`Limits::header_read_timeout_ms`]: hyper's header-read timeout. It runs whenever hyper
//!   waits for a request head, so it also closes a connection that never sends a byte and an
//!   idle keep-alive connection between requests.
//! - [`Limits::idle_timeout_ms`]: a connection whose peer owes bytes (the rest of a request
//!   body, or reading an answer) and moves none for that long is closed. A handler that is
//!   working (a long tool call, a stream waiting for its next event) is never idle.
//! - a request hyper cannot read (a head that is not HTTP/1.1: 400; a URI longer than
//!   [`MAX_URI_BYTES`]: 414; a head larger than [`MAX_HEAD_BYTES`] or with more than
//!   [`MAX_HEADER_FIELDS`] fields: 431) gets [`Handler::malformed`], the daemon's error body,
//!   instead of hyper's empty answer. On a Unix socket an HTTP/1.0 request (which hyper
//!   reads) gets the same 400 ([`Stream::HTTP_1_1_ONLY`]); on TCP it is served.
//! - at shutdown: remove the socket file and close the listener (a new client is refused at
//!   once), give open connections [`Limits::shutdown_drain_ms`] to finish (hyper's graceful
//!   shutdown), cut the rest.
//!
//! A server on TCP brings a `Handler<TcpStream>` and a [`tokio::net::TcpListener`] and gets
//! the same: the cap with its eviction, both timeouts, the malformed answers and the drain.
//! Its peer check sees the TCP connection (who may connect is mostly the bound address's
//! business), its requests carry the peer's `SocketAddr` instead of a [`peer::PeerUser`], and
//! it checks each request's `Host` itself ([`host::check`]).
//!
//! ```no_run
//! # async fn run<H: bxhttp::Handler>(handler: std::sync::Arc<H>) -> std::io::Result<()> {
//! let listener = tokio::net::UnixListener::bind("/run/example.sock")?;
//! let limits = bxhttp::Limits {
//!     max_connections: 128,
//!     header_read_timeout_ms: 10_000,
//!     idle_timeout_ms: 60_000,
//!     shutdown_drain_ms: 2_000,
//! };
//! bxhttp::serve("example", listener, handler, limits, std::future::pending()).await;
//! # Ok(())
//! # }
//! ```

mod activity;
pub mod ancestry;
pub mod answer;
mod body;
pub mod client;
mod closing;
pub mod fds;
pub mod host;
mod io;
pub mod listener;
mod malformed;
mod names;
mod open;
pub mod peer;
pub mod pidfd;
pub mod pool;
pub mod request;
mod serve;
pub mod servers;
pub mod socket;

pub use body::RequestBody;
pub use listener::{Listener, Stream};
pub use names::Names;
pub use serve::serve;
pub use socket::{SocketError, bind_socket, resolve_group};

use http::{Request, Response, StatusCode};
use std::error::Error;
use tokio::net::UnixStream;

/// How long the server waits before accepting again after `accept` failed (e.g. out of file
/// descriptors), in milliseconds.
pub const ACCEPT_RETRY_MS: u64 = 100;

/// How long a connection that is answered and closed (a refused peer's 403, a full server's
/// 503) may stay open to send its request, read the answer and close, in milliseconds.
pub const CLOSING_ANSWER_TIMEOUT_MS: u64 = 5_000;

/// How long a new connection may send nothing before it counts as silent, in milliseconds:
/// until then it is never closed to make room at the cap (in a burst its request is on its
/// way, or already in the socket waiting to be read, and closing would reset the client); a
/// connection that comes past the cap silent waits this long for its first bytes (then is
/// closed unanswered); and one answered 503 gets this long to send its request head.
pub const FIRST_BYTE_GRACE_MS: u64 = 1_000;

/// How long the peer of a request that waits on it (the rest of its body, or reading its
/// answer) must have moved no byte before the connection may be closed to make room at the
/// cap, in milliseconds: a client sending its body or reading its answer right now is not
/// closed under it (that would reset it), a slow or stalled one is.
pub const SLOW_PEER_QUIET_MS: u64 = 100;

/// How many connections past the cap are waited on (for their first bytes) or answered 503
/// at once. With all of them taken, the loop accepts no more until one is done (or room is
/// made): new clients wait in the listen backlog rather than be refused, and the descriptors
/// held stay bounded (`max_connections` plus this many). Fewer under a low open-file limit
/// ([`fds::overload_places`]), so the daemon keeps descriptors for its own files.
pub const MAX_OVERLOAD_ANSWERS: usize = 64;

/// What a 503 at the cap says in `Retry-After`, in seconds.
pub const OVERLOAD_RETRY_AFTER_S: u64 = 1;

/// How long an answered connection is read after the answer, for the peer's close, in
/// milliseconds (within [`CLOSING_ANSWER_TIMEOUT_MS`]). Closing a socket with bytes of the
/// peer's unread in it (a request body the 503 did not read) resets the connection, and on TCP
/// the reset can destroy the answer before the client reads it; so the server shuts its side,
/// reads and drops what comes until the peer closes, and only then closes.
pub const LINGER_MS: u64 = 2_000;

/// The most bytes a request head (request line and header fields) may take; a larger one is
/// answered 431. hyper's default read buffer, set explicitly so the error message is true.
pub const MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;

/// The most header fields a request may have; more are answered 431 (hyper's default, set
/// explicitly so the error message is true).
pub const MAX_HEADER_FIELDS: usize = 100;

/// The longest request URI hyper reads, in bytes; a longer one is answered 414. Fixed inside
/// hyper (it cannot be configured): named here for the error message.
pub const MAX_URI_BYTES: usize = u16::MAX as usize - 1;

/// The connection limits of a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most connections open at once; see the crate's documentation for what happens at
    /// the cap.
    pub max_connections: usize,
    /// How long the peer may take to send a request head, in milliseconds, counted from when
    /// the server starts waiting for it (a new connection, or the end of the previous answer).
    pub header_read_timeout_ms: u64,
    /// How long a connection whose peer owes bytes may move none, in milliseconds.
    pub idle_timeout_ms: u64,
    /// How long open connections may take to finish at shutdown, in milliseconds; then they
    /// are cut.
    pub shutdown_drain_ms: u64,
}

/// What a daemon brings to [`serve`]: who may connect, what it answers, and its error bodies.
/// The error bodies are provided in the one format ([`answer`]), worded with
/// [`Handler::NAMES`]; a handler overrides them only to answer otherwise. `S` is the kind of
/// connection it serves: a Unix socket's (the default) or a TCP one's.
pub trait Handler<S = UnixStream>: Send + Sync + 'static {
    /// The body of its answers; it can carry bxhttp's own answers ([`answer::Body`]).
    type Body: hyper::body::Body<Data: Send, Error: Into<Box<dyn Error + Send + Sync>>>
        + From<answer::Body>
        + Send
        + Unpin
        + 'static;

    /// The daemon's name and config keys, for the words of its error bodies.
    const NAMES: Names;

    /// Whether a connection serves more than one request (HTTP/1.1 keep-alive). A server
    /// whose clients send one request each (a scraper) says `false`: its connections close
    /// after the answer.
    const KEEP_ALIVE: bool = true;

    /// Whether the peer of `stream` may use the server; `Err` says why not (logged, and given
    /// to [`Handler::refused`]).
    fn check_peer(&self, stream: &S) -> impl Future<Output = Result<(), String>> + Send;

    /// The answer to `request`. The future owns what it needs (hyper runs it on the
    /// connection's task, which does not borrow the handler).
    fn handle(
        &self,
        request: Request<RequestBody>,
    ) -> impl Future<Output = Response<Self::Body>> + Send + use<Self, S>;

    /// The 403 a refused peer gets; `why` is what [`Handler::check_peer`] said.
    fn refused(&self, why: &str) -> Response<Self::Body> {
        answer::refused(&Self::NAMES, why).map(Into::into)
    }

    /// The 503 a connection gets when the server is at its cap and no connection may be
    /// closed to make room (each has a request in flight or has just opened); `why` says so.
    /// The loop adds `Retry-After` ([`OVERLOAD_RETRY_AFTER_S`]) unless it has one.
    fn overloaded(&self, why: &str) -> Response<Self::Body> {
        answer::overloaded(&Self::NAMES, why).map(Into::into)
    }

    /// The answer to a request hyper could not read: `status` is 400 (not HTTP/1.1), 414 (URI
    /// longer than [`MAX_URI_BYTES`]) or 431 (head larger than [`MAX_HEAD_BYTES`] or more than
    /// [`MAX_HEADER_FIELDS`] fields), `why` says what was wrong. It is sent in place of
    /// hyper's own empty answer, and the connection is closed.
    fn malformed(&self, status: StatusCode, why: &str) -> Response<Self::Body> {
        answer::malformed(status, why).map(Into::into)
    }
}
