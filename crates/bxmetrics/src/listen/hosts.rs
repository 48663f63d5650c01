//! The names the metrics listener answers as: its own address, `localhost` when it is on
//! loopback, any of the machine's addresses when it listens on all of them, and the names of
//! `[metrics] allowed_hosts`. Any other name in a request's `Host` is a page of another
//! site whose name was made to resolve to the box (DNS rebinding), or a mistake.

use crate::config::host_name_ok;
use bxhttp::host::split_port;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// The port a `Host` without one means (plain HTTP).
const DEFAULT_PORT: u16 = 80;

/// The names one listener answers as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hosts {
    /// The address the listener took (its real port when `listen` asked for port 0).
    bound: SocketAddr,
    /// `allowed_hosts`, lower-cased: a name, and the one port it is for when it says one.
    names: Vec<(String, Option<u16>)>,
}

impl Hosts {
    /// The names of a listener bound at `bound` with `allowed_hosts` (checked by the config;
    /// one that is not a host name is left out, and logged).
    pub fn new(bound: SocketAddr, allowed_hosts: &[String]) -> Hosts {
        let mut names = Vec::new();
        for host in allowed_hosts {
            match split_port(host).filter(|_| host_name_ok(host)) {
                Some((name, port)) => names.push((name.to_ascii_lowercase(), port)),
                None => tracing::warn!(%host, "metrics.allowed_hosts: not a host name; left out"),
            }
        }
        Hosts { bound, names }
    }

    /// Whether a request whose `Host` is `host` (lower case) is for this listener.
    pub fn allows(&self, host: &str) -> bool {
        let Some((name, port)) = split_port(host) else {
            return false;
        };
        let port = port.unwrap_or(DEFAULT_PORT);
        let ours = self.bound.ip();
        let own_port = port == self.bound.port();
        let own_name = match ip_literal(name) {
            Some(ip) => ip == ours || fits_unspecified(ours, ip),
            None => name == "localhost" && (ours.is_loopback() || ours.is_unspecified()),
        };
        (own_port && own_name)
            || self
                .names
                .iter()
                .any(|(allowed, only)| allowed == name && only.is_none_or(|only| only == port))
    }

    /// The names it answers as, for the answer to a request that named another.
    pub fn describe(&self) -> String {
        let port = self.bound.port();
        let ours = self.bound.ip();
        let mut names = vec![if ours.is_unspecified() {
            format!("this machine's addresses with port {port}")
        } else {
            self.bound.to_string()
        }];
        if ours.is_loopback() || ours.is_unspecified() {
            names.push(format!("localhost:{port}"));
        }
        names.extend(self.names.iter().map(|(name, only)| match only {
            Some(only) => format!("{name}:{only}"),
            None => name.clone(),
        }));
        names.join(", ")
    }
}

/// `name` as an IP address when it is one: `127.0.0.1`, or an IPv6 address in brackets.
fn ip_literal(name: &str) -> Option<IpAddr> {
    match name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => name.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4),
    }
}

/// Whether a listener bound at `ours` takes connections to `ip` because it listens on every
/// address: `0.0.0.0` every IPv4 one, `::` every one. An address is never a rebound name.
fn fits_unspecified(ours: IpAddr, ip: IpAddr) -> bool {
    match ours {
        IpAddr::V4(v4) => v4.is_unspecified() && ip.is_ipv4(),
        IpAddr::V6(v6) => v6.is_unspecified(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn hosts(bound: &str, allowed: &[&str]) -> Hosts {
        let allowed: Vec<String> = allowed.iter().map(|s| s.to_string()).collect();
        Hosts::new(bound.parse().unwrap(), &allowed)
    }

    #[test]
    fn on_loopback_its_address_and_localhost_at_its_port_are_its_names() {
        let h = hosts("127.0.0.1:9464", &[]);
        assert!(h.allows("127.0.0.1:9464"));
        assert!(h.allows("localhost:9464"));
        assert!(!h.allows("localhost:9465"));
        assert!(!h.allows("127.0.0.1"));
        assert!(!h.allows("[::1]:9464"));
        assert!(!h.allows("evil.example:9464"));
        assert!(!h.allows("127.0.0.1.evil.example:9464"));
        let v6 = hosts("[::1]:9464", &[]);
        assert!(v6.allows("[::1]:9464"));
        assert!(v6.allows("localhost:9464"));
        assert!(!v6.allows("127.0.0.1:9464"));
        assert_eq!(h.describe(), "127.0.0.1:9464, localhost:9464");
    }

    #[test]
    fn on_every_address_any_address_of_its_family_at_its_port_is_its_name() {
        let any4 = hosts("0.0.0.0:9464", &[]);
        assert!(any4.allows("192.168.1.5:9464"));
        assert!(any4.allows("127.0.0.1:9464"));
        assert!(any4.allows("localhost:9464"));
        assert!(!any4.allows("[::1]:9464"));
        assert!(!any4.allows("box.lan:9464"));
        let any = hosts("[::]:9464", &[]);
        assert!(any.allows("[fd00::5]:9464"));
        assert!(any.allows("10.0.0.2:9464"));
        let remote = hosts("192.168.1.5:9464", &[]);
        assert!(remote.allows("192.168.1.5:9464"));
        assert!(!remote.allows("localhost:9464"));
        assert!(!remote.allows("10.0.0.2:9464"));
    }

    #[test]
    fn an_allowed_name_is_its_own_at_any_port_or_the_one_it_gives() {
        let h = hosts(
            "127.0.0.1:9464",
            &["Metrics.Example.com", "box.lan:8443", "bad name"],
        );
        assert!(h.allows("metrics.example.com"));
        assert!(h.allows("metrics.example.com:443"));
        assert!(h.allows("box.lan:8443"));
        assert!(!h.allows("box.lan:9464"));
        assert!(!h.allows("box.lan"));
        assert!(!h.allows("bad name"));
        assert_eq!(
            h.describe(),
            "127.0.0.1:9464, localhost:9464, metrics.example.com, box.lan:8443"
        );
        // On port 80, a Host without a port is the listener's address.
        assert!(hosts("127.0.0.1:80", &[]).allows("127.0.0.1"));
    }
}
