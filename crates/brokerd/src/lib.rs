//! brokerd, boxmaker's tool broker.
//!
//! brokerd runs every tool call that loopd does not answer itself (built-in tools, and MCP
//! servers' tools) under explicit grants, labels every result, and records every decision in
//! an audit log. The parts:
//!
//! - [`config`]: the config file, grants and limits.
//! - [`tool`]: the [`tool::Tool`] trait; [`builtin`]: the built-in tools; [`ToolSet`]: the
//!   tools one brokerd offers, by name.
//! - [`policy`]: [`policy::decide`], whether a call may run, and why not.
//! - [`Broker`]: decides, runs under the time limit, caps and labels, audits ([`audit`]),
//!   and counts ([`metrics`]: Prometheus metrics, `GET /metrics`).
//! - [`secrets`]: the credentials brokerd holds, attaches to the calls a grant names, looks
//!   for in every outgoing request (the leak guard) and redacts from every result.
//! - [`server`]: HTTP over brokerd's Unix socket, which brokerd's own descendants (its MCP
//!   servers) may not use; [`reaper`]: brokerd as their subreaper; [`daemon`]: the whole daemon;
//!   [`logging`]: its log, which the MCP client library's verbatim events never reach.

pub mod audit;
pub mod broker;
pub mod builtin;
pub mod checkpoints;
pub mod config;
pub mod daemon;
pub mod logging;
pub mod mcp;
pub mod metrics;
pub mod policy;
pub mod reaper;
pub mod result;
pub mod secrets;
pub mod server;
pub mod tool;
pub mod toolset;

pub use broker::Broker;
pub use toolset::{ToolSet, ToolSetError};
