//! brokerd's log: as every daemon's (`bxconfig::init_log`: journald when its stderr is the
//! journal, otherwise stderr, at the config's level, `RUST_LOG` winning), except that the MCP
//! client library's own events are never written, whatever the level. rmcp logs what a server
//! sends verbatim (every notification at info, a server's requests and errors, its
//! `initialize` answer), which brokerd cannot redact field by field; brokerd logs those things
//! itself, redacted (`mcp::redact`).

/// The target of the MCP client library's events (and the prefix of its modules' targets).
const RMCP_TARGET: &str = "rmcp";

/// Whether an event of `target` may be written to brokerd's log: anything but rmcp's.
pub fn logged(target: &str) -> bool {
    target
        .strip_prefix(RMCP_TARGET)
        .is_none_or(|rest| !(rest.is_empty() || rest.starts_with("::")))
}

/// Starts brokerd's log at `level` (`bxconfig::init_log`), leaving out what [`logged`] refuses.
pub fn init(level: &str) {
    bxconfig::init_log("brokerd", level, logged);
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
