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
    /// more gets 429. Below `max_connections`: every waiting task holds its connection (its
    /// submitter waits on it for the turn's start), so at or above the cap a long queue
    /// filled the socket and clients got 503 (or nothing) instead of the 429, with no
    /// connection left for approvals or status.
    pub max_waiting_tasks: usize,
    /// The group whose members may use the socket (mode 0660). None: only root and loopd's own
    /// user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket_group: Option<String>,
    /// How many records one page of `GET /v1/sessions/{id}` holds when the client does not say.
    pub page_records: usize,
    /// The most connections open at once; above `max_waiting_tasks`, with room for the
    /// running turns' streams and other requests. At the cap the oldest connection without a
    /// request in flight is closed to make room (never one that has just opened); when none
    /// may be, a new one gets 503 with `Retry-After`.
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
            max_waiting_tasks: 128,
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
        if self.max_connections >= 1 && self.max_waiting_tasks >= self.max_connections {
            p.push(
                "api.max_waiting_tasks",
                format!(
                    "must be below api.max_connections ({}), is {}: every waiting task holds \
                     its connection, so the socket would fill before a task got its 429 and \
                     nothing could answer an approval; leave room for the running turns and \
                     other requests (by default half the connections)",
                    self.max_connections, self.max_waiting_tasks
                ),
            );
        }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn problems(api: &Api) -> Vec<bxconfig::Problem> {
        let mut p = Problems::new();
        api.check(&mut p);
        p.finish().err().unwrap_or_default()
    }

    #[test]
    fn by_default_a_queue_past_max_waiting_tasks_still_finds_a_connection_for_its_429() {
        let api = Api::default();
        assert!(problems(&api).is_empty());
        // Every waiting task holds its connection: the rest serve the running turns'
        // streams, approvals and status, and the 429 of one task too many.
        assert!(api.max_waiting_tasks < api.max_connections);
        assert!(api.max_connections - api.max_waiting_tasks >= api.max_connections / 4);
    }

    #[test]
    fn max_waiting_tasks_at_or_above_max_connections_is_refused_naming_both() {
        for max_waiting_tasks in [256, 300] {
            let api = Api {
                max_waiting_tasks,
                max_connections: 256,
                ..Api::default()
            };
            let found = problems(&api);
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!(found[0].key, "api.max_waiting_tasks");
            assert!(
                found[0].message.contains("api.max_connections (256)"),
                "{}",
                found[0].message
            );
        }
        // A cap that is wrong itself is the one problem named.
        let api = Api {
            max_connections: 0,
            ..Api::default()
        };
        let keys: Vec<String> = problems(&api).into_iter().map(|p| p.key).collect();
        assert_eq!(keys, ["api.max_connections"]);
    }
}
