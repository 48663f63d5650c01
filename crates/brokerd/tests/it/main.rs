//! brokerd's integration tests, one binary (issue 14): the shared helpers (`common`) and a
//! module per concern. The tests share one process: the reaper's tests, which reap the
//! process's children, run each in a process of its own (see `reaper`).

mod common;

mod approvals;
mod broker;
mod broker_record;
mod broker_sources;
mod builtin_files;
mod builtin_http_fetch;
mod checkpoint_kills;
mod cli;
mod duplicate_keys;
mod exec;
mod http_fetch_reach;
mod http_fetch_secrets;
mod http_fetch_secrets_broker;
mod mcp_everything;
mod mcp_peer;
mod mcp_secrets;
mod mcp_start;
mod metrics;
mod overlay_kills;
mod policy;
mod reaper;
mod secrets;
mod secrets_daemon;
mod server;
mod server_limits;
