//! boxd's socket (`socket`, optional): HTTP/1.1 over a Unix socket through [`bxhttp`], which
//! answers `GET /metrics` (boxd's metrics, `docs/metrics.md`) and nothing else.
//!
//! Who may connect: root, boxd's own user, and members of `socket_group` when one is set, as
//! the kernel reports the peer (`SO_PEERCRED`); anyone else gets 403. The socket's mode is
//! [`SOCKET_MODE_PRIVATE`], or [`SOCKET_MODE_GROUP`] with the group. No request has a body
//! boxd reads, so there is no body limit; the connection limits are the constants below.

use crate::metrics::Metrics;
use bxhttp::answer::{Body, Problem};
use bxhttp::{Names, RequestBody, SocketError};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use proto::api::error_kind;
use std::path::Path;
use std::sync::Arc;
use tokio::net::{UnixListener, UnixStream};

/// boxd's name and its config keys, in the errors bxhttp words for it.
pub const NAMES: Names = Names::new("boxd", "socket_group", "boxd");

/// The socket's mode with no `socket_group`: boxd's user only.
pub const SOCKET_MODE_PRIVATE: u32 = 0o600;

/// The socket's mode with a `socket_group`: boxd's user and that group.
pub const SOCKET_MODE_GROUP: u32 = 0o660;

/// The most connections open on boxd's socket at once (a scraper or two, and `curl`).
pub const MAX_CONNECTIONS: usize = 16;

/// How long a client may take to send a request head, in milliseconds.
pub const HEADER_READ_TIMEOUT_MS: u64 = 10_000;

/// How long a connection whose client owes bytes may move none, in milliseconds.
pub const IDLE_TIMEOUT_MS: u64 = 10_000;

/// How long open connections may take to finish once boxd stops, in milliseconds.
pub const SHUTDOWN_DRAIN_MS: u64 = 1_000;

/// Who may connect: besides root and `own_uid`, members of `allowed_gid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peers {
    /// boxd's own uid.
    pub own_uid: u32,
    /// The gid of `socket_group`, if one is set.
    pub allowed_gid: Option<u32>,
}

/// Binds boxd's socket at `path` (a stale socket file replaced), mode
/// [`SOCKET_MODE_PRIVATE`], or [`SOCKET_MODE_GROUP`] and group `group` when one is given;
/// and who may connect to it. Must be called inside a tokio runtime.
pub fn bind(path: &Path, group: Option<&str>) -> Result<(UnixListener, Peers), SocketError> {
    let allowed_gid = group
        .map(|name| bxhttp::resolve_group(&NAMES, name))
        .transpose()?;
    let mode = if allowed_gid.is_some() {
        SOCKET_MODE_GROUP
    } else {
        SOCKET_MODE_PRIVATE
    };
    let listener = bxhttp::bind_socket(&NAMES, path, mode, allowed_gid)?;
    let peers = Peers {
        own_uid: nix::unistd::getuid().as_raw(),
        allowed_gid,
    };
    Ok((listener, peers))
}

/// Serves `metrics` on `listener` until `shutdown` resolves; then drains, cuts the rest and
/// removes the socket file.
pub async fn serve(
    listener: UnixListener,
    metrics: Arc<Metrics>,
    peers: Peers,
    shutdown: impl Future<Output = ()>,
) {
    let limits = bxhttp::Limits {
        max_connections: MAX_CONNECTIONS,
        header_read_timeout_ms: HEADER_READ_TIMEOUT_MS,
        idle_timeout_ms: IDLE_TIMEOUT_MS,
        shutdown_drain_ms: SHUTDOWN_DRAIN_MS,
    };
    let server = Arc::new(Server { metrics, peers });
    bxhttp::serve("boxd", listener, server, limits, shutdown).await;
}

/// boxd's side of the server: the peer check and the one route.
struct Server {
    metrics: Arc<Metrics>,
    peers: Peers,
}

impl bxhttp::Handler for Server {
    type Body = Body;
    const NAMES: Names = NAMES;

    fn check_peer(&self, stream: &UnixStream) -> impl Future<Output = Result<(), String>> + Send {
        let peers = self.peers;
        async move {
            bxhttp::peer::check_user(stream, &NAMES, peers.own_uid, peers.allowed_gid)
                .await
                .map(|_| ())
        }
    }

    fn handle(
        &self,
        request: Request<RequestBody>,
    ) -> impl Future<Output = Response<Body>> + Send + use<> {
        let response = answer(&self.metrics, &request).unwrap_or_else(Problem::into_response);
        std::future::ready(response)
    }

    /// boxd's connection cap is a constant, not a config key: the 503 names it.
    fn overloaded(&self, why: &str) -> Response<Body> {
        let message = format!(
            "boxd is at its connection cap ({MAX_CONNECTIONS} connections): {why}; \
             try again shortly"
        );
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            error_kind::UNAVAILABLE,
            message,
        )
        .into_response()
    }
}

/// The answer to one request: `GET /metrics`, or 404/405.
fn answer<B>(metrics: &Metrics, request: &Request<B>) -> Result<Response<Body>, Problem> {
    let path = request.uri().path();
    if path != "/metrics" {
        return Err(Problem::no_such_path(path));
    }
    if request.method() != Method::GET {
        return Err(Problem::wrong_method(path, Method::GET, request.method()));
    }
    let accept = request.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
    let internal =
        |e: String| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, error_kind::INTERNAL, e);
    let scraped = bxmetrics::scrape(metrics, accept)
        .map_err(|e| internal(format!("the metrics could not be encoded: {e}")))?;
    Response::builder()
        .header(CONTENT_TYPE, scraped.content_type)
        .body(Full::new(Bytes::from(scraped.body)).boxed())
        .map_err(|e| internal(format!("the metrics answer could not be built: {e}")))
}
