//! brokerd's HTTP server: HTTP/1.1 with JSON over its Unix socket.
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/call`, body a `proto::ToolRequest` | 200 and a `proto::ToolResponse` for every decided call (denials and failures included); 400 for a body that is not a `ToolRequest` (the message says why); 413 over `limits.max_body_bytes` |
//! | `GET /v1/catalogue?session=ID` | 200 and a `proto::Catalogue`: the tools some grant lets that session call, sorted by name; 400 without a valid session |
//! | `GET /v1/health` | 200 and `{"status":"ok"}` |
//!
//! Errors are `proto::api::ApiError` bodies (`{"error":{"code","kind","message"}}`); unknown
//! paths get 404, wrong methods 405. Each connection's peer is checked first (root, brokerd's
//! own user, or a member of `socket_group`; and not a process descending from brokerd, such as
//! an MCP server: [`descent`]); a refused peer gets 403.
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

pub mod descent;
mod peer;
mod routes;
mod socket;

pub use peer::peer_allowed;
pub use socket::{SOCKET_MODE_GROUP, SOCKET_MODE_PRIVATE, SocketError, bind_socket, resolve_group};

use crate::broker::Broker;
use crate::config::Config;
use http::{Request, Response, StatusCode};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use proto::api::error_kind;
use routes::{Body, Problem, handle};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long open connections may take to finish once the server stops, in milliseconds.
pub const SHUTDOWN_DRAIN_MS: u64 = 2_000;

/// How long a refused peer's connection may stay open to receive its 403, in milliseconds.
pub const PEER_REFUSAL_TIMEOUT_MS: u64 = 5_000;

/// How long to wait before accepting again after `accept` failed (e.g. out of file
/// descriptors), in milliseconds.
pub const ACCEPT_RETRY_MS: u64 = 100;

/// How the server serves: its body limit and who may connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerOptions {
    /// The largest request body accepted, in bytes; larger ones get 413.
    pub max_body_bytes: usize,
    /// The group whose members may connect, besides root and brokerd's own user.
    pub allowed_gid: Option<u32>,
    /// brokerd's own uid: always allowed.
    pub own_uid: u32,
    /// brokerd's own pid: a peer descending from it (an MCP server, or anything one started)
    /// is refused, whatever its user; brokerd's own process is allowed.
    pub own_pid: u32,
    /// How long open connections may take to finish at shutdown, in milliseconds.
    pub shutdown_drain_ms: u64,
}

impl ServerOptions {
    /// The options of `cfg`: its body limit, `socket_group` resolved to a gid (an unknown group
    /// is an error), and this process's uid and pid as the owner.
    pub fn from_config(cfg: &Config) -> Result<ServerOptions, SocketError> {
        let allowed_gid = cfg.socket_group.as_deref().map(resolve_group).transpose()?;
        Ok(ServerOptions {
            max_body_bytes: cfg.limits.max_body_bytes,
            allowed_gid,
            own_uid: nix::unistd::getuid().as_raw(),
            own_pid: std::process::id(),
            shutdown_drain_ms: SHUTDOWN_DRAIN_MS,
        })
    }
}

/// Serves `broker` on `listener` until `shutdown` resolves; then stops accepting, gives open
/// connections [`ServerOptions::shutdown_drain_ms`] to finish, cuts the rest, and removes the
/// socket file.
pub async fn serve(
    listener: UnixListener,
    broker: Arc<Broker>,
    options: ServerOptions,
    shutdown: impl Future<Output = ()>,
) {
    let (stop, stopped) = watch::channel(false);
    let options = Arc::new(options);
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                let conn = connection(
                    stream,
                    Arc::clone(&broker),
                    Arc::clone(&options),
                    stopped.clone(),
                );
                connections.spawn(conn);
            }
            Err(e) => {
                tracing::warn!("accepting a connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
            }
        }
    }
    let _ = stop.send(true);
    let drain = Duration::from_millis(options.shutdown_drain_ms);
    let drained = tokio::time::timeout(drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "connections still open after the drain time; cutting them"
        );
        connections.shutdown().await;
    }
    remove_socket_file(&listener);
    tracing::info!("brokerd server stopped");
}

fn remove_socket_file(listener: &UnixListener) {
    let path = listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(|p| p.to_path_buf()));
    if let Some(path) = path
        && let Err(e) = std::fs::remove_file(&path)
    {
        tracing::warn!(path = %path.display(), "cannot remove the socket: {e}");
    }
}

/// One connection: the peer check, then HTTP/1.1 until the client closes or the server stops.
async fn connection(
    stream: UnixStream,
    broker: Arc<Broker>,
    options: Arc<ServerOptions>,
    stopped: watch::Receiver<bool>,
) {
    if let Err(why) = peer::check_peer(&stream, &options).await {
        tracing::warn!("connection refused: {why}");
        refuse(stream, why).await;
        return;
    }
    let max_body_bytes = options.max_body_bytes;
    let service = service_fn(move |request| handle(Arc::clone(&broker), max_body_bytes, request));
    let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = stopping(stopped) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!("connection ended with an error: {e}");
    }
}

/// Resolves once `stopped` turns true (or its sender is gone).
async fn stopping(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

/// Answers a refused peer's request with a 403 and closes; bounded in time.
async fn refuse(stream: UnixStream, why: String) {
    let message = format!("this peer may not use brokerd: {why}");
    let service = service_fn(move |_request: Request<hyper::body::Incoming>| {
        let response: Response<Body> = Problem::new(
            StatusCode::FORBIDDEN,
            error_kind::FORBIDDEN,
            message.clone(),
        )
        .into_response();
        async move { Ok::<_, Infallible>(response) }
    });
    let conn = http1::Builder::new()
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    let limit = Duration::from_millis(PEER_REFUSAL_TIMEOUT_MS);
    if tokio::time::timeout(limit, conn).await.is_err() {
        tracing::debug!("refused connection timed out");
    }
}
