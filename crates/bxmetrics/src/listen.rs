//! The optional TCP listener (`[metrics] listen`): `GET /metrics` and nothing else, one
//! request per connection, for requests that name the listener in `Host` ([`hosts`]), on
//! bxhttp's accept loop: at most [`MAX_CONNECTIONS`] open, and at the cap the oldest one with
//! no request (idle, or a head arriving slowly) closed to make room, so connections that
//! never send anything cannot keep a scraper out.

mod hosts;

use crate::exposition::{Source, scrape};
use bxhttp::answer::Body;
use bxhttp::host::HostRefusal;
use bxhttp::{Limits, Names, RequestBody};
use bytes::Bytes;
use hosts::Hosts;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};

/// The most scrape connections open at once; at the cap the oldest connection with no
/// request in flight is closed to make room, and when every one has a request being
/// answered a new one gets 503.
pub const MAX_CONNECTIONS: usize = 8;
/// How long a scraper may take to send its request head, in milliseconds.
pub const HEADER_READ_TIMEOUT_MS: u64 = 5_000;
/// How long a scraper that owes bytes (the rest of a request body, reading its answer) may
/// move none, in milliseconds.
pub const IDLE_TIMEOUT_MS: u64 = 10_000;
/// How long open connections may take to finish when the daemon stops, in milliseconds.
pub const SHUTDOWN_DRAIN_MS: u64 = 1_000;
/// The `Retry-After` of the 503 a scraper gets when every connection is being answered, in
/// seconds.
pub const RETRY_AFTER_S: u64 = 1;

/// The listener's limits, as bxhttp's accept loop takes them.
const LIMITS: Limits = Limits {
    max_connections: MAX_CONNECTIONS,
    header_read_timeout_ms: HEADER_READ_TIMEOUT_MS,
    idle_timeout_ms: IDLE_TIMEOUT_MS,
    shutdown_drain_ms: SHUTDOWN_DRAIN_MS,
};

/// Binds the TCP listener at `addr` (already checked by [`crate::MetricsConfig::check`]).
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves `GET /metrics` from `source` on `listener` until `shutdown` resolves, to requests
/// whose `Host` is the listener's address or one of `allowed_hosts` (`[metrics]
/// allowed_hosts`); `name` says which daemon in the logs.
pub async fn serve_tcp(
    name: &'static str,
    listener: TcpListener,
    source: Arc<dyn Source>,
    allowed_hosts: Vec<String>,
    shutdown: impl Future<Output = ()>,
) {
    let bound = match listener.local_addr() {
        Ok(bound) => bound,
        Err(e) => {
            // Without it no `Host` could be checked: better no listener than an open one.
            tracing::error!(
                server = name,
                "metrics: cannot read the listener's address: {e}"
            );
            return;
        }
    };
    let scrapes = Arc::new(Scrapes {
        source,
        hosts: Hosts::new(bound, &allowed_hosts),
    });
    bxhttp::serve(name, listener, scrapes, LIMITS, shutdown).await;
}

/// The listener's side of bxhttp's loop: what a request gets.
struct Scrapes {
    source: Arc<dyn Source>,
    hosts: Hosts,
}

impl bxhttp::Handler<TcpStream> for Scrapes {
    type Body = Body;
    const NAMES: Names = Names::new("the metrics listener", "metrics.listen", "metrics");
    // A scraper sends one request per scrape: nothing to keep a connection open for.
    const KEEP_ALIVE: bool = false;

    /// Anyone who reaches the port: who can is `[metrics] listen`'s business (loopback
    /// unless `allow_remote`).
    async fn check_peer(&self, _stream: &TcpStream) -> Result<(), String> {
        Ok(())
    }

    fn handle(
        &self,
        request: Request<RequestBody>,
    ) -> impl Future<Output = Response<Body>> + Send + use<> {
        let response = answer(&*self.source, &self.hosts, &request);
        async move { response }
    }

    fn overloaded(&self, why: &str) -> Response<Body> {
        let mut response = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the metrics listener is busy: {why}; try again shortly\n"),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
        response
    }

    fn malformed(&self, status: StatusCode, why: &str) -> Response<Body> {
        plain(status, format!("{why}\n"))
    }
}

/// The answer to one request on the listener.
fn answer<B>(source: &dyn Source, hosts: &Hosts, request: &Request<B>) -> Response<Body> {
    if let Err(refusal) = bxhttp::host::check(request, |host| hosts.allows(host)) {
        return refused(&refusal, hosts);
    }
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
            .body(Full::new(Bytes::from(scraped.body)).boxed())
            .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "encoding failed\n")),
        Err(_) => plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be encoded\n",
        ),
    }
}

/// The answer to a request that does not name the listener (421) or names it unclearly
/// (400): what was wrong and the names it answers as.
fn refused(refusal: &HostRefusal, hosts: &Hosts) -> Response<Body> {
    tracing::debug!("metrics: request refused: {refusal}");
    plain(
        refusal.status(),
        format!(
            "{refusal}. This metrics listener answers as {}; \
             another name goes in [metrics] allowed_hosts\n",
            hosts.describe()
        ),
    )
}

/// A short text answer.
fn plain(status: StatusCode, text: impl Into<String>) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(text.into())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
