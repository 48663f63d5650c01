//! brokerd's HTTP server: HTTP/1.1 with JSON over its Unix socket.
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/call`, body a `proto::ToolRequest` | 200 and a `proto::ToolResponse` for every decided call (denials and failures included); 400 for a body that is not a `ToolRequest` (the message says why); 413 over `limits.max_body_bytes` |
//! | `GET /v1/catalogue?session=ID` | 200 and a `proto::Catalogue`: the tools some grant lets that session call, sorted by name; 400 without a valid session |
//! | `GET /v1/health` | 200 and a `proto::BrokerHealth`: `{"status":"ok","exec":"bubblewrap + Landlock v4"}`, or `"exec":"unavailable: REASON"` when the sandbox cannot be made |
//! | `GET /metrics` | 200 and brokerd's metrics (`docs/metrics.md`): OpenMetrics when `Accept` names `application/openmetrics-text`, else the classic text format 0.0.4 |
//!
//! Errors are `proto::api::ApiError` bodies (`{"error":{"code","kind","message"}}`); unknown
//! paths get 404, wrong methods 405; a request head hyper cannot read gets 400, 414 or 431
//! with such a body too (see [`bxhttp`]). Each connection's peer is checked first (root, brokerd's
//! own user, or a member of `socket_group`; and not a process descending from brokerd, such as
//! an MCP server: [`descent`]); a refused peer gets 403. Connections are served by [`bxhttp`]
//! within `[limits]`' `max_connections`, `header_read_timeout_ms` and `idle_timeout_ms`; at the
//! cap, with every connection busy, a new one gets 503.
//!
//! ```no_run
//! # async fn run(broker: std::sync::Arc<brokerd::Broker>, cfg: &brokerd::config::Config) -> anyhow::Result<()> {
//! use brokerd::server::{ServerOptions, bind_socket, serve};
//! let options = ServerOptions::from_config(cfg)?;
//! let listener = bind_socket(&cfg.socket, options.allowed_gid)?;
//! serve(listener, broker, options, std::future::pending()).await;
//! # Ok(())
//! # }
//! ```

mod catalogue;
pub mod descent;
mod peer;
mod routes;
mod undo;

pub use bxhttp::SocketError;
pub use bxhttp::peer::peer_allowed;

use crate::broker::Broker;
use crate::config::Config;
use bxhttp::{Names, RequestBody};
use http::{Request, Response};
use routes::{Body, handle};
use std::path::Path;
use std::sync::Arc;
use tokio::net::{UnixListener, UnixStream};

/// brokerd's name and its config keys, in the errors bxhttp words for it.
pub const NAMES: Names = Names::new("brokerd", "socket_group", "limits");

/// The socket's mode with no `socket_group`: brokerd's user only.
pub const SOCKET_MODE_PRIVATE: u32 = 0o600;

/// The socket's mode with a `socket_group`: brokerd's user and that group.
pub const SOCKET_MODE_GROUP: u32 = 0o660;

/// The gid of group `name` (`socket_group`).
pub fn resolve_group(name: &str) -> Result<u32, SocketError> {
    bxhttp::resolve_group(&NAMES, name)
}

/// Binds the socket at `path`: replaces a stale socket file, binds, and sets mode
/// [`SOCKET_MODE_PRIVATE`], or [`SOCKET_MODE_GROUP`] and group `gid` when one is given. Must be
/// called inside a tokio runtime.
pub fn bind_socket(path: &Path, gid: Option<u32>) -> Result<UnixListener, SocketError> {
    let mode = if gid.is_some() {
        SOCKET_MODE_GROUP
    } else {
        SOCKET_MODE_PRIVATE
    };
    bxhttp::bind_socket(&NAMES, path, mode, gid)
}

/// How long open connections may take to finish once the server stops, in milliseconds.
pub const SHUTDOWN_DRAIN_MS: u64 = 2_000;

/// How the server serves: its body limit, its connection limits and who may connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// The largest request body accepted, in bytes; larger ones get 413.
    pub max_body_bytes: usize,
    /// The group whose members may connect, besides root and brokerd's own user.
    pub allowed_gid: Option<u32>,
    /// brokerd's own uid: always allowed.
    pub own_uid: u32,
    /// The connection cap, the header-read and idle timeouts, and the drain at shutdown
    /// ([`SHUTDOWN_DRAIN_MS`]).
    pub connections: bxhttp::Limits,
}

impl ServerOptions {
    /// The options of `cfg`: its limits, `socket_group` resolved to a gid (an unknown group
    /// is an error), and this process's uid as the owner.
    pub fn from_config(cfg: &Config) -> Result<ServerOptions, SocketError> {
        let allowed_gid = cfg.socket_group.as_deref().map(resolve_group).transpose()?;
        Ok(ServerOptions {
            max_body_bytes: cfg.limits.max_body_bytes,
            allowed_gid,
            own_uid: nix::unistd::getuid().as_raw(),
            connections: bxhttp::Limits {
                max_connections: cfg.limits.max_connections,
                header_read_timeout_ms: cfg.limits.header_read_timeout_ms,
                idle_timeout_ms: cfg.limits.idle_timeout_ms,
                shutdown_drain_ms: SHUTDOWN_DRAIN_MS,
            },
        })
    }
}

/// Serves `broker` on `listener` until `shutdown` resolves; then stops accepting, gives open
/// connections the drain time of [`ServerOptions::connections`] to finish, cuts the rest, and
/// removes the socket file.
pub async fn serve(
    listener: UnixListener,
    broker: Arc<Broker>,
    options: ServerOptions,
    shutdown: impl Future<Output = ()>,
) {
    let limits = options.connections;
    let server = Arc::new(Server { broker, options });
    bxhttp::serve("brokerd", listener, server, limits, shutdown).await;
}

/// brokerd's side of the server: the peer check, the routes and the error bodies.
struct Server {
    broker: Arc<Broker>,
    options: ServerOptions,
}

impl bxhttp::Handler for Server {
    type Body = Body;
    const NAMES: Names = NAMES;

    fn check_peer(&self, stream: &UnixStream) -> impl Future<Output = Result<(), String>> + Send {
        peer::check_peer(stream, &self.options)
    }

    fn handle(
        &self,
        request: Request<RequestBody>,
    ) -> impl Future<Output = Response<Body>> + Send + use<> {
        let answer = handle(
            Arc::clone(&self.broker),
            self.options.max_body_bytes,
            request,
        );
        async move {
            match answer.await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }
}
