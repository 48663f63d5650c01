//! The `[metrics]` section of every daemon's config: where the optional TCP listener binds,
//! whether it may bind beyond loopback, and the names it answers as besides its address.

use serde::{Deserialize, Serialize};
use std::net::{Ipv6Addr, SocketAddr};

/// The most names `allowed_hosts` may list.
pub const MAX_ALLOWED_HOSTS: usize = 32;
/// The longest name in `allowed_hosts`, in bytes (a DNS name's limit, plus a port).
pub const MAX_HOST_BYTES: usize = 253 + 6;

/// The `[metrics]` section. `/metrics` on the daemon's socket is always served; this adds a
/// TCP listener for a Prometheus that cannot reach the socket.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Where to serve `GET /metrics` over TCP (`"127.0.0.1:9464"`); none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// Allows a `listen` address that is not loopback. Metrics name tools, MCP servers and
    /// token counts: nothing secret, but nothing a stranger needs either.
    #[serde(default)]
    pub allow_remote: bool,
    /// Names the listener answers as besides its own address (`"metrics.example.com"`, or
    /// `"name:port"` for that port only), for a scraper that reaches it by a name through a
    /// proxy. A request whose `Host` is none of them, nor the listen address (or `localhost`
    /// on loopback), gets 421: a page of another site whose name resolves to the box (DNS
    /// rebinding) reads nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
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
    /// `allowed_hosts` lists more names than [`MAX_ALLOWED_HOSTS`].
    #[error("metrics.allowed_hosts lists {0} names: at most {MAX_ALLOWED_HOSTS} are allowed")]
    TooManyHosts(usize),
    /// A name in `allowed_hosts` is not `host` or `host:port`.
    #[error(
        "metrics.allowed_hosts: {0:?} is not a host name, `host:port` or `[IPv6]:port` \
         (letters, digits, `-` and `.`, at most {MAX_HOST_BYTES} bytes)"
    )]
    BadHost(String),
}

impl MetricsConfigError {
    /// The config key the error is about, for the daemon's list of problems.
    pub fn key(&self) -> &'static str {
        match self {
            MetricsConfigError::NotLoopback(_) => "metrics.listen",
            MetricsConfigError::TooManyHosts(_) | MetricsConfigError::BadHost(_) => {
                "metrics.allowed_hosts"
            }
        }
    }
}

impl MetricsConfig {
    /// Checks the loopback rule and the names of `allowed_hosts`.
    pub fn check(&self) -> Result<(), MetricsConfigError> {
        if let Some(addr) = self.listen
            && !addr.ip().is_loopback()
            && !self.allow_remote
        {
            return Err(MetricsConfigError::NotLoopback(addr));
        }
        if self.allowed_hosts.len() > MAX_ALLOWED_HOSTS {
            return Err(MetricsConfigError::TooManyHosts(self.allowed_hosts.len()));
        }
        match self.allowed_hosts.iter().find(|host| !host_name_ok(host)) {
            Some(bad) => Err(MetricsConfigError::BadHost(bad.clone())),
            None => Ok(()),
        }
    }
}

/// Whether `text` is `host` or `host:port`: a name of letters, digits, `-` and `.`, or an
/// IPv6 address in brackets.
pub(crate) fn host_name_ok(text: &str) -> bool {
    if text.len() > MAX_HOST_BYTES {
        return false;
    }
    let Some((host, _port)) = bxhttp::host::split_port(text) else {
        return false;
    };
    match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().is_ok(),
        None => host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'),
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
    fn allowed_hosts_are_names_with_an_optional_port_and_a_bad_one_is_named() {
        let ok = parse("allowed_hosts = [\"metrics.example.com\", \"box:9464\", \"[::1]:9464\"]");
        assert_eq!(ok.check(), Ok(()));
        for bad in ["evil/x", "", "box:port", "[::zz]", "a b"] {
            let config = MetricsConfig {
                allowed_hosts: vec![bad.to_string()],
                ..MetricsConfig::default()
            };
            let err = config.check().unwrap_err();
            assert_eq!(err.key(), "metrics.allowed_hosts", "{bad}");
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
        let many = MetricsConfig {
            allowed_hosts: vec!["x".to_string(); MAX_ALLOWED_HOSTS + 1],
            ..MetricsConfig::default()
        };
        assert_eq!(
            many.check(),
            Err(MetricsConfigError::TooManyHosts(MAX_ALLOWED_HOSTS + 1))
        );
    }

    #[test]
    fn an_unknown_key_or_a_bad_address_is_refused() {
        assert!(toml::from_str::<MetricsConfig>("port = 9464").is_err());
        assert!(toml::from_str::<MetricsConfig>("listen = \"localhost\"").is_err());
    }
}
