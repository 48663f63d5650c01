//! The console's TCP listener, on bxhttp's accept loop: HTTP/1.1 with keep-alive (for a
//! browser's page and its assets), at most [`MAX_WEB_CONNECTIONS`] connections (at the cap
//! the oldest one with no request, idle or sending its head slowly, is closed to make room;
//! when every one has a request being answered, a new one gets 503), a request head within
//! [`WEB_HEADER_READ_TIMEOUT_MS`], a peer that owes bytes and moves none closed after
//! [`WEB_IDLE_TIMEOUT_MS`], and when loopd stops [`WEB_SHUTDOWN_DRAIN_MS`] for the answers
//! under way (the event streams end first) before the rest is cut.

use super::Console;
use super::guard::secure_headers;
use super::routes::{Ctx, handle};
use crate::api::Backend;
use bxhttp::answer::{Body, Problem};
use bxhttp::{Limits, Names, RequestBody};
use http::{HeaderValue, Request, Response, StatusCode, header};
use proto::api::error_kind;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The most connections open at once. A browser opens up to six per host, and each open page
/// holds one more for its event stream.
pub const MAX_WEB_CONNECTIONS: usize = 64;
/// How long a client may take to send a request head, in milliseconds (also how long a kept
/// connection may stay idle between requests).
pub const WEB_HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// How long a client that owes bytes (the rest of a request body, reading its answer) may
/// move none, in milliseconds. An event stream waiting for its next event owes nothing.
pub const WEB_IDLE_TIMEOUT_MS: u64 = 60_000;
/// How long open connections may take to finish when loopd stops, in milliseconds.
pub const WEB_SHUTDOWN_DRAIN_MS: u64 = 2_000;
/// The `Retry-After` of the 503 a browser gets when every connection is being answered, in
/// seconds.
pub const WEB_RETRY_AFTER_S: u64 = 1;

/// The console's limits, as bxhttp's accept loop takes them.
const LIMITS: Limits = Limits {
    max_connections: MAX_WEB_CONNECTIONS,
    header_read_timeout_ms: WEB_HEADER_READ_TIMEOUT_MS,
    idle_timeout_ms: WEB_IDLE_TIMEOUT_MS,
    shutdown_drain_ms: WEB_SHUTDOWN_DRAIN_MS,
};

/// Binds `[web] listen` (checked as loopback, or allowed remote, by the config).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves the console on `listener` from `backend` until `shutdown` turns true; then the
/// listener closes, the event streams end, and the connections get [`WEB_SHUTDOWN_DRAIN_MS`]
/// to finish before the rest is cut.
pub async fn serve<B: Backend>(
    listener: TcpListener,
    backend: Arc<B>,
    console: Arc<Console>,
    shutdown: watch::Receiver<bool>,
) {
    let site = Arc::new(Site {
        ctx: Arc::new(Ctx {
            backend,
            console,
            shutdown: shutdown.clone(),
        }),
    });
    let stopping = crate::api::stopping(shutdown);
    bxhttp::serve("web console", listener, site, LIMITS, stopping).await;
}

/// The console's side of bxhttp's loop.
struct Site<B> {
    ctx: Arc<Ctx<B>>,
}

impl<B: Backend> bxhttp::Handler<TcpStream> for Site<B> {
    type Body = Body;
    const NAMES: Names = super::form::NAMES;

    /// Anyone who reaches the port: who can is `[web] listen`'s business (loopback unless
    /// `allow_remote`); every request is then checked by its `Host` and its session.
    async fn check_peer(&self, _stream: &TcpStream) -> Result<(), String> {
        Ok(())
    }

    fn handle(
        &self,
        request: Request<RequestBody>,
    ) -> impl Future<Output = Response<Body>> + Send + use<B> {
        let ctx = Arc::clone(&self.ctx);
        async move {
            match handle(ctx, request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    }

    fn overloaded(&self, why: &str) -> Response<Body> {
        let problem = Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            error_kind::UNAVAILABLE,
            format!("the console is busy: {why}; try again shortly"),
        );
        let mut response = super::pages::html(problem.status, super::pages::error(&problem));
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(WEB_RETRY_AFTER_S));
        secure_headers(response.headers_mut(), false);
        response
    }

    fn malformed(&self, status: StatusCode, why: &str) -> Response<Body> {
        let mut response = bxhttp::answer::malformed(status, why);
        secure_headers(response.headers_mut(), false);
        response
    }
}
