//! The optional TCP listener (`[metrics] listen`): `GET /metrics` and nothing else, one
//! request per connection, within fixed limits, so a scraper that misbehaves costs little.

use crate::exposition::{Source, scrape};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// The most scrape connections open at once; a connection over the cap is closed unanswered.
pub const MAX_CONNECTIONS: usize = 8;
/// How long a scraper may take to send its request head, in milliseconds.
pub const HEADER_READ_TIMEOUT_MS: u64 = 5_000;
/// How long one connection may stay open in all, in milliseconds.
pub const CONNECTION_TIMEOUT_MS: u64 = 15_000;
/// How long the listener waits before accepting again after `accept` failed, in milliseconds.
pub const ACCEPT_RETRY_MS: u64 = 100;

/// Binds the TCP listener at `addr` (already checked by [`crate::MetricsConfig::check`]).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves `GET /metrics` from `source` on `listener` until `shutdown` resolves; `name` says
/// which daemon in the logs.
pub async fn serve_tcp(
    name: &'static str,
    listener: TcpListener,
    source: Arc<dyn Source>,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut connections = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(server = name, "metrics: accepting a connection failed: {e}");
                tokio::time::sleep(Duration::from_millis(ACCEPT_RETRY_MS)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::debug!(
                server = name,
                "metrics: connection cap reached, closing one"
            );
            continue;
        };
        let source = Arc::clone(&source);
        connections.spawn(async move {
            let limit = Duration::from_millis(CONNECTION_TIMEOUT_MS);
            let _ = tokio::time::timeout(limit, one_connection(stream, source)).await;
            drop(permit);
        });
    }
    connections.abort_all();
}

/// One connection: one request, answered, then closed.
async fn one_connection(stream: TcpStream, source: Arc<dyn Source>) {
    let service = service_fn(move |request: Request<Incoming>| {
        let source = Arc::clone(&source);
        async move { Ok::<_, Infallible>(answer(&*source, &request)) }
    });
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(HEADER_READ_TIMEOUT_MS))
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// The answer to one request on the listener.
fn answer<B>(source: &dyn Source, request: &Request<B>) -> Response<Full<Bytes>> {
    if request.uri().path() != "/metrics" {
        return plain(StatusCode::NOT_FOUND, "only /metrics is served here\n");
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "/metrics takes GET\n");
    }
    let accept = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok());
    match scrape(source, accept) {
        Ok(scraped) => Response::builder()
            .header(header::CONTENT_TYPE, scraped.content_type)
            .body(Full::new(Bytes::from(scraped.body)))
            .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "encoding failed\n")),
        Err(_) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be encoded\n",
        ),
    }
}

/// A short text answer.
fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
