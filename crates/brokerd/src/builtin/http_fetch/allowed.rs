//! What one grant lets `http_fetch` reach, compiled once per call: host globs (each with its
//! one port and scheme, or the grant's `ports`), and the networks of non-global addresses it
//! may connect to anyway. A target is checked in two steps: its name and port before anything
//! is resolved (so a name outside the grant never even reaches DNS), then the addresses the
//! name resolved to, of which only those that pass are connected to.

use super::address::{in_networks, non_global};
use super::target::Target;
use crate::config::{Grant, HostEntry, parse_network};
use globset::{GlobBuilder, GlobMatcher};
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};

/// Why a target is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No host glob of the grant matches the name.
    Host,
    /// A glob matches the name, but not on this port (or scheme).
    Port,
    /// Every address the name resolved to is non-global and outside the grant's networks;
    /// the first of them, and what it is.
    Address {
        /// The first refused address.
        address: IpAddr,
        /// What kind of address it is (`"loopback"`).
        what: &'static str,
    },
}

impl Refusal {
    /// The refusal of the model's own URL: it may name the host, port and address, which
    /// came from the model or from brokerd's own resolution of the model's name.
    pub(crate) fn first_hop(self, target: &Target) -> String {
        match self {
            Refusal::Host => format!("host {} is not one this grant allows", target.host),
            Refusal::Port => format!(
                "port {} of host {} is not one this grant allows",
                target.port, target.host
            ),
            Refusal::Address { address, what } => format!(
                "host {} resolves only to addresses this grant does not allow \
                 ({address} is {what})",
                target.host
            ),
        }
    }

    /// The refusal of a redirect: in brokerd's words only, since the target came from the
    /// remote server's `Location`.
    pub(crate) fn redirect(self) -> String {
        match self {
            Refusal::Host => "redirect to a host outside the grant".to_string(),
            Refusal::Port => "redirect to a port outside the grant".to_string(),
            Refusal::Address { .. } => {
                "redirect to a host whose addresses are outside the grant".to_string()
            }
        }
    }
}

/// One grant's reach. See the module documentation.
#[derive(Debug, Clone)]
pub(crate) struct Allowed {
    hosts: Vec<(GlobMatcher, HostEntry)>,
    ports: Vec<u16>,
    networks: Vec<IpNet>,
}

impl Allowed {
    /// Compiles `grant`'s `hosts`, `ports` and `networks`; the error names an entry that does
    /// not parse (the config check refuses those, so only a grant made in code gets here).
    pub(crate) fn new(grant: &Grant) -> Result<Allowed, String> {
        let mut hosts = Vec::with_capacity(grant.hosts.len());
        for text in &grant.hosts {
            let entry = HostEntry::parse(text)
                .map_err(|e| format!("the grant's host entry {text:?} is not valid: {e}"))?;
            let glob = GlobBuilder::new(&entry.glob)
                .case_insensitive(true)
                .build()
                .map_err(|e| format!("the grant's host glob {text:?} is not valid: {e}"))?;
            hosts.push((glob.compile_matcher(), entry));
        }
        let networks = grant
            .networks
            .iter()
            .map(|n| parse_network(n).map_err(|e| format!("the grant's networks: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Allowed {
            hosts,
            ports: grant.ports.clone(),
            networks,
        })
    }

    /// Whether `target`'s name, port and scheme are within the grant (nothing resolved yet).
    pub(crate) fn check_name(&self, target: &Target) -> Result<(), Refusal> {
        let mut named = false;
        for (glob, entry) in &self.hosts {
            if !glob.is_match(&target.host) {
                continue;
            }
            named = true;
            let port_ok = match entry.port {
                Some(port) => port == target.port,
                None => self.ports.contains(&target.port),
            };
            let scheme_ok = entry.scheme.is_none_or(|s| s == target.scheme.as_str());
            if port_ok && scheme_ok {
                return Ok(());
            }
        }
        Err(if named { Refusal::Port } else { Refusal::Host })
    }

    /// The addresses of `resolved` that may be connected to (IPv4-mapped ones as IPv4), in
    /// order; none is a refusal naming the first address refused.
    pub(crate) fn check_addresses(
        &self,
        resolved: &[SocketAddr],
    ) -> Result<Vec<SocketAddr>, Refusal> {
        let mut first_refused = None;
        let mut passed = Vec::new();
        for addr in resolved {
            let ip = addr.ip().to_canonical();
            match non_global(ip) {
                Some(what) if !in_networks(&self.networks, ip) => {
                    first_refused.get_or_insert(Refusal::Address { address: ip, what });
                }
                _ => passed.push(SocketAddr::new(ip, addr.port())),
            }
        }
        match (passed.is_empty(), first_refused) {
            (true, Some(refusal)) => Err(refusal),
            _ => Ok(passed),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn allowed(grant: serde_json::Value) -> Allowed {
        let mut grant = grant;
        grant["tool"] = json!("http_fetch");
        Allowed::new(&serde_json::from_value(grant).unwrap()).unwrap()
    }

    fn name(a: &Allowed, url: &str) -> Result<(), Refusal> {
        a.check_name(&Target::parse(url).unwrap())
    }

    #[test]
    fn ports_default_to_80_and_443_and_an_entry_port_allows_only_itself() {
        let a = allowed(json!({"hosts": ["*.example.org", "api.test:8080", "https://s.test"]}));
        assert_eq!(name(&a, "http://www.example.org/"), Ok(()));
        assert_eq!(name(&a, "https://www.example.org/"), Ok(()));
        assert_eq!(name(&a, "http://www.example.org:8080/"), Err(Refusal::Port));
        assert_eq!(name(&a, "http://api.test:8080/"), Ok(()));
        assert_eq!(name(&a, "https://api.test:8080/"), Ok(()));
        assert_eq!(name(&a, "http://api.test/"), Err(Refusal::Port));
        assert_eq!(name(&a, "https://s.test/"), Ok(()));
        assert_eq!(name(&a, "http://s.test:443/"), Err(Refusal::Port));
        assert_eq!(name(&a, "http://evil.test/"), Err(Refusal::Host));
        let a = allowed(json!({"hosts": ["example.org"], "ports": [8443]}));
        assert_eq!(name(&a, "https://example.org:8443/"), Ok(()));
        assert_eq!(name(&a, "https://example.org/"), Err(Refusal::Port));
    }

    #[test]
    fn only_addresses_that_pass_are_kept() {
        let sock = |s: &str| s.parse::<SocketAddr>().unwrap();
        let a = allowed(json!({"hosts": ["*"]}));
        assert_eq!(
            a.check_addresses(&[sock("127.0.0.1:80"), sock("93.184.215.14:80")]),
            Ok(vec![sock("93.184.215.14:80")])
        );
        assert_eq!(
            a.check_addresses(&[sock("[::ffff:10.0.0.1]:80"), sock("127.0.0.1:80")]),
            Err(Refusal::Address {
                address: "10.0.0.1".parse().unwrap(),
                what: "private"
            })
        );
        let a = allowed(json!({"hosts": ["*"], "networks": ["127.0.0.0/8"]}));
        assert_eq!(
            a.check_addresses(&[sock("[::ffff:127.0.0.1]:80"), sock("[::1]:80")]),
            Ok(vec![sock("127.0.0.1:80")])
        );
    }
}
