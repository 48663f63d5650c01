//! loopd's HTTP API: HTTP/1.1 with JSON over loopd's Unix socket (SPEC 7).
//!
//! The routes and bodies are in [`proto::api`]. This module binds the socket (mode 0660,
//! optionally owned by `api.socket_group`), checks each peer with `SO_PEERCRED`, serves the
//! routes with hyper, all through [`bxhttp`] (the connection cap and timeouts of `[api]`, the
//! error bodies), and streams turn events as server-sent events. What it serves comes from a [`Backend`]: the
//! engine in loopd, a stand-in in tests.
//!
//! ```no_run
//! # async fn run<B: loopd::api::Backend>(backend: std::sync::Arc<B>) -> anyhow::Result<()> {
//! use loopd::api::{ApiOptions, bind_socket, serve};
//! let options = ApiOptions::from_config(&loopd::config::Api::default())?;
//! let listener = bind_socket("/run/boxmaker/loopd.sock".as_ref(), options.allowed_gid)?;
//! serve(listener, backend, options, std::future::pending()).await;
//! # Ok(())
//! # }
//! ```

mod backend;
mod body;
mod options;
mod owner;
mod routes;
mod server;
mod sse;
mod usage;
mod web;

pub use backend::{ApiFailure, Backend, Submitted, check_approval_answer};
pub use bxhttp::Limits;
pub use bxhttp::SocketError;
pub use bxhttp::peer::peer_allowed;
/// What `GET /metrics` is answered from (`Backend::metrics`).
pub use bxmetrics::Source as MetricsSource;
pub use options::{
    ApiOptions, MAX_PAGE_RECORDS, NAMES, SHUTDOWN_DRAIN_MS, SOCKET_MODE, SSE_PING_INTERVAL_MS,
    bind_socket, resolve_group,
};
pub(crate) use routes::{blocking, page_query, stopping};
pub use server::serve;
pub use sse::{comment_frame, turn_frame};
pub(crate) use sse::{follow_stream, task_stream};
pub use usage::{UsageQuery, parse_day};
