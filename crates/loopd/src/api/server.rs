//! The accept loop: a peer check per connection, HTTP/1.1 per connection, and a bounded
//! drain at shutdown.

use super::body::{Body, Problem};
use super::peer::{Refused, check_peer};
use super::routes::{Ctx, handle, stopping};
use super::{ACCEPT_RETRY_MS, ApiOptions, Backend, PEER_REFUSAL_TIMEOUT_MS};
use http::{Request, Response, StatusCode};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use proto::api::error_kind;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Serves the API on `listener` with `backend` until `shutdown` resolves; then stops
/// accepting, ends open event streams, gives open connections
/// [`ApiOptions::shutdown_drain_ms`] to finish, cuts the rest, and removes the socket file.
///
/// Each connection's peer is checked first (see [`super::peer_allowed`]); a refused peer
/// gets a 403 and the connection is closed.
pub async fn serve<B: Backend>(
    listener: UnixListener,
    backend: Arc<B>,
    options: ApiOptions,
    shutdown: impl Future<Output = ()>,
) {
    let (stop, stopped) = watch::channel(false);
    let drain = Duration::from_millis(options.shutdown_drain_ms);
    let ctx = Arc::new(Ctx {
        backend,
        options,
        shutdown: stopped,
    });
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
                connections.spawn(connection(stream, Arc::clone(&ctx)));
            }
            Err(e) => {
                tracing::warn!("accepting an API connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
            }
        }
    }
    let _ = stop.send(true);
    let drained = tokio::time::timeout(drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            open = connections.len(),
            "API connections still open after the drain time; cutting them"
        );
        connections.shutdown().await;
    }
    remove_socket_file(&listener);
    tracing::info!("loopd API stopped");
}

fn remove_socket_file(listener: &UnixListener) {
    let path: Option<PathBuf> = listener
        .local_addr()
        .ok()
        .and_then(|a| a.as_pathname().map(|p| p.to_path_buf()));
    if let Some(path) = path
        && let Err(e) = std::fs::remove_file(&path)
    {
        tracing::warn!(path = %path.display(), "cannot remove the API socket: {e}");
    }
}

/// Serves one connection: checks the peer, then HTTP/1.1 until the client closes or the
/// server stops.
async fn connection<B: Backend>(stream: UnixStream, ctx: Arc<Ctx<B>>) {
    if let Err(refused) = check_peer(&stream, &ctx.options).await {
        tracing::warn!(uid = ?refused.uid, "API connection refused: {}", refused.why);
        refuse(stream, refused).await;
        return;
    }
    let stopped = stopping(ctx.shutdown.clone());
    let service = service_fn(move |request| handle(Arc::clone(&ctx), request));
    let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = stopped => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!("API connection ended with an error: {e}");
    }
}

/// Answers the refused peer's request with a 403, then closes; bounded in time.
async fn refuse(stream: UnixStream, refused: Refused) {
    let message = format!("this user may not use loopd: {}", refused.why);
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
    match tokio::time::timeout(limit, conn).await {
        Ok(Err(e)) => tracing::debug!("refused API connection ended with an error: {e}"),
        Ok(Ok(())) => {}
        Err(_) => tracing::debug!("refused API connection timed out"),
    }
}
