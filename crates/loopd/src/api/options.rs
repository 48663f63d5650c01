//! The API's limits and who may use it, and its socket: bound by [`bxhttp::socket`] with
//! loopd's policy (mode 0660 always, optionally `api.socket_group`) and loopd's words.

use bxhttp::{Names, SocketError};
use std::path::Path;
use tokio::net::UnixListener;

/// loopd's name and the `[api]` keys, in the errors bxhttp words for it.
pub const NAMES: Names = Names::new("loopd", "api.socket_group", "api");

/// The API socket's mode: read and write for its user and group, nothing for others.
pub const SOCKET_MODE: u32 = 0o660;

/// The gid of group `name` (`api.socket_group`).
pub fn resolve_group(name: &str) -> Result<u32, SocketError> {
    bxhttp::resolve_group(&NAMES, name)
}

/// Binds the API socket at `path`: removes a stale socket file there (one nobody answers
/// on), binds, sets mode [`SOCKET_MODE`], and gives it to group `gid` when one is set.
/// Must be called inside a tokio runtime.
pub fn bind_socket(path: &Path, gid: Option<u32>) -> Result<UnixListener, SocketError> {
    bxhttp::bind_socket(&NAMES, path, SOCKET_MODE, gid)
}

/// The most records one page of `GET /v1/sessions/{id}` holds, whatever `limit` asks for.
pub const MAX_PAGE_RECORDS: u64 = 1_000;

/// How often an idle SSE stream gets a `: ping` comment, in milliseconds: the API's own
/// constant, which clients read too (boxctl's silence limit is three of these).
pub use proto::api::SSE_PING_INTERVAL_MS;

/// How long open connections may take to finish once the server is told to stop, in
/// milliseconds; then they are cut.
pub const SHUTDOWN_DRAIN_MS: u64 = 2_000;

/// How the API serves: its limits and who may connect.
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// The largest request body accepted, in bytes; larger ones get 413.
    pub max_body_bytes: usize,
    /// How many records a page holds when the client does not say (at most
    /// [`MAX_PAGE_RECORDS`]).
    pub page_records: u64,
    /// The group whose members may connect, besides root and loopd's own user.
    pub allowed_gid: Option<u32>,
    /// loopd's own uid: always allowed.
    pub own_uid: u32,
    /// How often an idle SSE stream gets a `: ping` comment, in milliseconds.
    pub sse_ping_interval_ms: u64,
    /// The connection cap, the header-read and idle timeouts, and the drain at shutdown
    /// ([`SHUTDOWN_DRAIN_MS`]).
    pub connections: bxhttp::Limits,
    /// loopd's connections to brokerd (`Broker::connections`), when `[broker] socket` is set:
    /// the processes they reached are brokerd, whose descendants (its MCP servers, which run as
    /// loopd's user) may not answer approvals or get a web console link (`api::owner`).
    pub broker: Option<bxhttp::pool::Pool>,
    /// The web console's sign-ins, when `[web] listen` is set: `POST /v1/web/link` makes a
    /// one-time link, `POST /v1/web/revoke` ends every browser session.
    pub web: Option<std::sync::Arc<crate::signin::SignIns>>,
}

impl ApiOptions {
    /// The options for `[api]`, with `socket_group` resolved to its gid and this process's
    /// uid as the owner. An unknown group is an error.
    pub fn from_config(api: &crate::config::Api) -> Result<ApiOptions, SocketError> {
        let allowed_gid = match &api.socket_group {
            Some(name) => Some(resolve_group(name)?),
            None => None,
        };
        Ok(ApiOptions {
            max_body_bytes: api.max_body_bytes,
            page_records: u64::try_from(api.page_records)
                .unwrap_or(MAX_PAGE_RECORDS)
                .clamp(1, MAX_PAGE_RECORDS),
            allowed_gid,
            own_uid: nix::unistd::getuid().as_raw(),
            sse_ping_interval_ms: SSE_PING_INTERVAL_MS,
            connections: bxhttp::Limits {
                max_connections: api.max_connections,
                header_read_timeout_ms: api.header_read_timeout_ms,
                idle_timeout_ms: api.idle_timeout_ms,
                shutdown_drain_ms: SHUTDOWN_DRAIN_MS,
            },
            broker: None,
            web: None,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn options_from_the_default_config_take_its_limits_and_this_uid() {
        let options = ApiOptions::from_config(&crate::config::Api::default()).unwrap();
        assert_eq!(options.max_body_bytes, 1_048_576);
        assert_eq!(options.page_records, 100);
        assert_eq!(options.allowed_gid, None);
        assert_eq!(options.own_uid, nix::unistd::getuid().as_raw());
        assert_eq!(
            options.connections,
            bxhttp::Limits {
                max_connections: 256,
                header_read_timeout_ms: 10_000,
                idle_timeout_ms: 60_000,
                shutdown_drain_ms: SHUTDOWN_DRAIN_MS,
            }
        );
    }

    #[test]
    fn options_cap_page_records() {
        let api = crate::config::Api {
            page_records: 1_000_000,
            ..Default::default()
        };
        let options = ApiOptions::from_config(&api).unwrap();
        assert_eq!(options.page_records, MAX_PAGE_RECORDS);
    }

    #[test]
    fn options_with_an_unknown_group_say_which() {
        let api = crate::config::Api {
            socket_group: Some("no-such-group-boxmaker-test".into()),
            ..Default::default()
        };
        let err = ApiOptions::from_config(&api).unwrap_err().to_string();
        assert!(err.contains("no-such-group-boxmaker-test"), "{err}");
        assert!(err.contains("no such group"), "{err}");
        assert!(err.starts_with("api.socket_group "), "{err}");
    }

    #[tokio::test]
    async fn the_socket_is_bound_0660_and_a_live_one_names_loopd() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sock");
        let _listener = bind_socket(&path, None).unwrap();
        let mode = std::fs::metadata(&path).unwrap().mode() & 0o777;
        assert_eq!(mode, SOCKET_MODE);
        let err = bind_socket(&path, None).unwrap_err().to_string();
        assert!(err.contains("is loopd already running?"), "{err}");
    }
}
