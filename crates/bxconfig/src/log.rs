//! The `[log]` section every daemon shares, and how every daemon logs ([`init_log`]): to
//! journald when its stderr is the journal ([`stderr_is_journal`]), otherwise to stderr in a
//! format whose level boxd reads back from each line ([`split_log_line`]).

mod init;
mod journal;
mod line;

pub use init::{every_target, init_log};
pub use journal::{JOURNAL_STREAM_ENV, is_journal_stream, stderr_is_journal};
pub use line::split_log_line;

use serde::{Deserialize, Serialize};

/// How much a daemon logs (to stderr, or journald under systemd).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Everything, including per-record detail.
    Trace,
    /// Diagnostic detail.
    Debug,
    /// Normal operation: starts, stops, decisions worth knowing.
    #[default]
    Info,
    /// Something odd that the daemon handled.
    Warn,
    /// Something failed.
    Error,
}

impl LogLevel {
    /// The level as a `tracing` filter directive (`"info"`).
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        }
    }
}

/// `[log]`: the daemon's log level. `RUST_LOG`, when set, takes precedence for finer filters.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `trace`, `debug`, `info`, `warn` or `error`. Default `info`.
    pub level: LogLevel,
}
