//! loopd's integration tests: what goes through its public surface (the daemon binary, the
//! HTTP API, the CLI, the brokerd client), in one test binary with a module per concern.
//! Tests of one internal module are unit tests beside its code (`src/<module>/tests.rs` or `src/<module>/tests/`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_common;
mod fake_llama;
mod web_common;

mod api_approvals;
mod api_limits;
mod api_owner;
mod api_peer;
mod api_routes;
mod api_shutdown;
mod api_sse;
mod api_usage;
mod broker_conn;
mod broker_port;
mod broker_status;
mod cli;
mod daemon_faults;
mod daemon_usage;
mod web_connections;
mod web_console;
mod web_undo;
