//! `[api]`: loopd's own HTTP API; `[broker]`: how loopd reaches brokerd.

use bxconfig::Problems;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[api]`: limits of the HTTP API on loopd's Unix socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Api {
    /// The largest request body accepted, in bytes; larger ones get 413.
    pub max_body_bytes: usize,
    /// How many tasks may wait for one busy session; one more gets 409. 0: none wait.
    pub session_queue_len: usize,
    /// How many tasks may wait across all sessions (for their session or for a slot); one
    /// more gets 429.
    pub max_waiting_tasks: usize,
    /// The group whose members may use the socket (mode 0660). None: only root and loopd's own
    /// user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket_group: Option<String>,
    /// How many records one page of `GET /v1/sessions/{id}` holds when the client does not say.
    pub page_records: usize,
    /// The most connections open at once. At the cap the oldest connection without a request
    /// in flight is closed to make room; when every one has a request in flight, a new one
    /// gets 503.
    pub max_connections: usize,
    /// How long a client may take to send a request head, in milliseconds (also how long an
    /// idle keep-alive connection stays open).
    pub header_read_timeout_ms: u64,
    /// How long a connection whose client owes bytes (the rest of a request body, reading an
    /// answer) may move none, in milliseconds.
    pub idle_timeout_ms: u64,
}

impl Default for Api {
    fn default() -> Api {
        Api {
            max_body_bytes: 1_048_576,
            session_queue_len: 8,
            max_waiting_tasks: 256,
            socket_group: None,
            page_records: 100,
            max_connections: 256,
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
        }
    }
}

impl Api {
    pub(super) fn check(&self, p: &mut Problems) {
        p.at_least("api.max_body_bytes", self.max_body_bytes, 1);
        if let Some(group) = &self.socket_group {
            p.non_empty("api.socket_group", group);
        }
        p.at_least("api.page_records", self.page_records, 1);
        p.at_least("api.max_waiting_tasks", self.max_waiting_tasks, 1);
        p.at_least("api.max_connections", self.max_connections, 1);
        p.at_least("api.header_read_timeout_ms", self.header_read_timeout_ms, 1);
        p.at_least("api.idle_timeout_ms", self.idle_timeout_ms, 1);
    }
}

/// `[broker]`: brokerd, which runs every tool loopd does not answer itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Broker {
    /// brokerd's Unix socket. Overridden by `--broker PATH`. None: no broker: loopd answers
    /// tools with its in-process fakes and says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    /// The longest one tool call through brokerd may take, in milliseconds.
    pub call_timeout_ms: u64,
    /// brokerd's tools that go straight into the tools array (the core set); every other
    /// tool it offers is found with `find_tool` and called with `call_tool`. A name brokerd
    /// does not offer the session is left out.
    pub core_tools: Vec<String>,
}

impl Default for Broker {
    fn default() -> Broker {
        Broker {
            socket: None,
            call_timeout_ms: 30_000,
            core_tools: Vec::new(),
        }
    }
}

impl Broker {
    pub(super) fn check(&self, p: &mut Problems) {
        if let Some(socket) = &self.socket {
            p.socket_path("broker.socket", socket);
        }
        p.at_least("broker.call_timeout_ms", self.call_timeout_ms, 1);
    }
}
