//! loopd, boxmaker's agent loop.
//!
//! It keeps persistent sessions (append-only, hash-chained logs that survive a crash at any
//! byte) and runs turns of model calls and tool calls over them, serving boxctl over HTTP on
//! a Unix socket. See `docs/ARCHITECTURE.md` for where each piece lives.

pub mod api;
pub mod baseline;
pub mod broker;
pub mod compact;
pub mod config;
pub mod daemon;
pub mod engine;
pub mod heartbeat;
pub mod journal;
pub mod llama;
pub mod memory;
pub mod outcome;
pub mod outputs;
pub mod runtime;
pub mod session;
pub mod subagent;
pub mod summarise;
pub mod text;
pub mod tools;
pub mod toolset;
pub mod turn;
pub mod untrusted;
