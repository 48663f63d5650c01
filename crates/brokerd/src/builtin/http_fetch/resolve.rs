//! Turning a target's host into addresses, once per hop: an IP literal is itself, a name in
//! `[http_fetch] resolve` gets the addresses listed there, any other name is asked of the
//! system resolver. The caller checks the addresses and connects only to those that pass, so
//! a name cannot answer one address to the check and another to the connection.

use crate::config::HttpFetchSettings;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

/// The resolver of one `http_fetch` tool.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolver {
    /// `[http_fetch] resolve`, names in lower case.
    overrides: BTreeMap<String, Vec<IpAddr>>,
}

impl Resolver {
    /// A resolver answering the names of `settings.resolve` itself.
    pub(crate) fn new(settings: &HttpFetchSettings) -> Resolver {
        let overrides = settings
            .resolve
            .iter()
            .map(|(name, addresses)| (name.to_ascii_lowercase(), addresses.clone()))
            .collect();
        Resolver { overrides }
    }

    /// The addresses of `host` (lower case, IPv6 without brackets), each with `port`.
    pub(crate) async fn resolve(&self, host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        if let Some(addresses) = self.overrides.get(host) {
            return Ok(addresses
                .iter()
                .map(|ip| SocketAddr::new(*ip, port))
                .collect());
        }
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn literals_are_themselves_and_overrides_replace_dns() {
        let mut settings = HttpFetchSettings::default();
        settings
            .resolve
            .insert("Evil.Test".into(), vec!["127.0.0.1".parse().unwrap()]);
        let r = Resolver::new(&settings);
        let sock = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            r.resolve("evil.test", 81).await.unwrap(),
            [sock("127.0.0.1:81")]
        );
        assert_eq!(
            r.resolve("::ffff:10.0.0.1", 80).await.unwrap(),
            [sock("[::ffff:10.0.0.1]:80")]
        );
        // A name that is not overridden goes to the system resolver (/etc/hosts here).
        let local = r.resolve("localhost", 80).await.unwrap();
        assert!(local.iter().all(|a| a.ip().is_loopback()), "{local:?}");
        assert!(!local.is_empty());
    }
}
