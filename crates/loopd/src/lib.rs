//! loopd, boxmaker's agent loop.
//!
//! It keeps persistent sessions (append-only, hash-chained logs that survive a crash at any
//! byte) and, in later issues, runs turns of model calls and tool calls over them. See
//! `docs/ARCHITECTURE.md` for where each piece lives.

pub mod config;
pub mod session;
