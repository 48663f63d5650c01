//! The console's TCP listener: HTTP/1.1 (keep-alive, for a browser's page and its assets),
//! at most [`MAX_WEB_CONNECTIONS`] connections, a request head within
//! [`WEB_HEADER_READ_TIMEOUT_MS`], every connection cut when loopd stops.

use super::Console;
use super::routes::{Ctx, handle};
use crate::api::Backend;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

/// The most connections open at once; one over the cap is closed unanswered. A browser opens
/// up to six per host, and each open page holds one more for its event stream.
pub const MAX_WEB_CONNECTIONS: usize = 64;
/// How long a client may take to send a request head, in milliseconds.
pub const WEB_HEADER_READ_TIMEOUT_MS: u64 = 10_000;
/// How long the listener waits before accepting again after `accept` failed, in milliseconds.
const ACCEPT_RETRY_MS: u64 = 100;

/// Binds `[web] listen` (checked as loopback, or allowed remote, by the config).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves the console on `listener` from `backend` until `shutdown` turns true; then every
/// open connection (event streams included, which end first) is cut.
pub async fn serve<B: Backend>(
    listener: TcpListener,
    backend: Arc<B>,
    console: Arc<Console>,
    shutdown: watch::Receiver<bool>,
) {
    let ctx = Arc::new(Ctx {
        backend,
        console,
        shutdown: shutdown.clone(),
    });
    let slots = Arc::new(Semaphore::new(MAX_WEB_CONNECTIONS));
    let mut connections = JoinSet::new();
    let stopping = crate::api::stopping(shutdown);
    tokio::pin!(stopping);
    loop {
        let accepted = tokio::select! {
            () = &mut stopping => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!("web: accepting a connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::debug!("web: connection cap reached, closing one");
            continue;
        };
        let ctx = Arc::clone(&ctx);
        connections.spawn(async move {
            let service = service_fn(move |request: hyper::Request<Incoming>| {
                handle(Arc::clone(&ctx), request)
            });
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_millis(WEB_HEADER_READ_TIMEOUT_MS))
                .serve_connection(TokioIo::new(stream), service)
                .await;
            drop(permit);
        });
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}
