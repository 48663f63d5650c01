//! The `[metrics]` section of every daemon's config: where the optional TCP listener binds,
//! and whether it may bind beyond loopback.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The `[metrics]` section. `/metrics` on the daemon's socket is always served; this adds a
/// TCP listener for a Prometheus that cannot reach the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where to serve `GET /metrics` over TCP (`"127.0.0.1:9464"`); none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// Allows a `listen` address that is not loopback. Metrics name tools, MCP servers and
    /// token counts: nothing secret, but nothing a stranger needs either.
    #[serde(default)]
    pub allow_remote: bool,
}

/// Why a `[metrics]` section was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsConfigError {
    /// `listen` is not a loopback address and `allow_remote` is not set.
    #[error(
        "metrics.listen = \"{0}\" is not a loopback address: metrics are served on loopback \
         only unless metrics.allow_remote = true"
    )]
    NotLoopback(SocketAddr),
}

impl MetricsConfig {
    /// Checks the loopback rule.
    pub fn check(&self) -> Result<(), MetricsConfigError> {
        match self.listen {
            Some(addr) if !addr.ip().is_loopback() && !self.allow_remote => {
                Err(MetricsConfigError::NotLoopback(addr))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(text: &str) -> MetricsConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn loopback_is_allowed_and_anything_else_needs_allow_remote() {
        assert_eq!(parse("").check(), Ok(()));
        assert_eq!(parse("listen = \"127.0.0.1:9464\"").check(), Ok(()));
        assert_eq!(parse("listen = \"[::1]:9464\"").check(), Ok(()));
        let remote = parse("listen = \"0.0.0.0:9464\"");
        let err = remote.check().unwrap_err().to_string();
        assert!(
            err.contains("0.0.0.0:9464") && err.contains("allow_remote"),
            "{err}"
        );
        let allowed = parse("listen = \"0.0.0.0:9464\"\nallow_remote = true");
        assert_eq!(allowed.check(), Ok(()));
    }

    #[test]
    fn an_unknown_key_or_a_bad_address_is_refused() {
        assert!(toml::from_str::<MetricsConfig>("port = 9464").is_err());
        assert!(toml::from_str::<MetricsConfig>("listen = \"localhost\"").is_err());
    }
}
