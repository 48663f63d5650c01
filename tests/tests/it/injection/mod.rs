#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The prompt-injection suite: an adversarial model (fakellama obeying every injected
//! instruction), the real brokerd and loopd, and servers under the attacker's control. Each
//! module is one attack; each test fails if the attack gets through.
//!
//! The attacks of issue 11 that need no model live beside the code they attack: an MCP server
//! calling brokerd's socket as session `main` (`crates/brokerd/tests/it/mcp_peer.rs`), a
//! directory swapped for a symlink under a file tool
//! (`crates/brokerd/tests/it/builtin_files/race.rs`), slow-loris clients
//! (`tests/tests/it/slow_clients.rs`), and forged turns in every template family
//! (`crates/bxcore/tests/it/sanitize.rs`).

mod ask_before_write;
pub(crate) mod common;
mod internal_address;
mod reserved_sessions;
mod secrets_out;
mod shipped_config;
mod subagent_inheritance;
mod tool_descriptions;
mod tool_failures;
mod weather_page;
