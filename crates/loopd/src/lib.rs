//! loopd, boxmaker's agent loop.
//!
//! It keeps persistent sessions (append-only, hash-chained logs that survive a crash at any
//! byte) and runs turns of model calls and tool calls over them, serving boxctl over HTTP on
//! a Unix socket. See `docs/ARCHITECTURE.md` for where each piece lives.

pub mod api;
pub(crate) mod baseline;
pub mod blocking;
pub mod broker;
pub(crate) mod budget;
pub mod compact;
pub mod config;
pub mod daemon;
pub mod engine;
pub(crate) mod heartbeat;
pub(crate) mod journal;
pub mod kv;
pub mod llama;
pub(crate) mod memory;
pub mod meter;
pub(crate) mod outcome;
pub(crate) mod outputs;
pub mod route;
pub(crate) mod runtime;
pub(crate) mod schedule;
pub mod session;
pub mod signin;
pub mod subagent;
pub(crate) mod summarise;
pub(crate) mod text;
pub mod tools;
pub(crate) mod toolset;
pub mod turn;
pub(crate) mod undone;
pub(crate) mod untrusted;
pub mod web;
pub mod zone;

#[cfg(test)]
mod tests;
