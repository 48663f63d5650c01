//! brokerd's log: stderr at the config's level (`RUST_LOG`, when set, wins), as every daemon's
//! (`bxconfig::log_to_stderr`), except that the MCP client library's own events are never
//! written, whatever the level. rmcp logs what a server sends verbatim (every notification at
//! info, a server's requests and errors, its `initialize` answer), which brokerd cannot redact
//! field by field; brokerd logs those things itself, redacted (`mcp::redact`).

use std::io::IsTerminal;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// The target of the MCP client library's events (and the prefix of its modules' targets).
const RMCP_TARGET: &str = "rmcp";

/// Whether an event of `target` may be written to brokerd's log: anything but rmcp's.
pub fn logged(target: &str) -> bool {
    target
        .strip_prefix(RMCP_TARGET)
        .is_none_or(|rest| !(rest.is_empty() || rest.starts_with("::")))
}

/// Logs to stderr at `level` (`RUST_LOG`, when set, wins), leaving out what [`logged`] refuses.
/// A line that cannot be written is lost, never a panic (`bxconfig::Lossy`).
pub fn init(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(bxconfig::lossy_stderr)
        .log_internal_errors(false)
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            logged(meta.target())
        }));
    tracing_subscriber::registry()
        .with(filter)
        .with(layer)
        .init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmcp_events_never_reach_the_log() {
        assert!(!logged("rmcp"));
        assert!(!logged("rmcp::service"));
        assert!(!logged("rmcp::service::client"));
        assert!(logged("brokerd::mcp::log"));
        assert!(logged("brokerd::mcp::stderr"));
        assert!(logged("rmcpish"));
    }
}
