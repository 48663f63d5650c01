//! Which addresses a run with network may reach, as the routing-policy rules of its network
//! namespace: the rule of brokerd's `http_fetch`, global addresses only and a non-global one
//! only inside a network the grant lists, applied by the kernel to every socket of the run.
//!
//! The rules, first match wins (lower priority number first; the kernel's own rule for the
//! `local` table, priority 0, comes before them all, so the sandbox's own loopback works):
//!
//! 1. slirp4netns's DNS forwarder ([`SLIRP_DNS`]) on UDP and TCP port 53: the main table. That
//!    address forwards to the host's resolver on whatever port is asked, so
//! 2. any other port of it is prohibited;
//! 3. slirp4netns's gateway ([`SLIRP_GATEWAY`]): the main table, or the default route through
//!    it could not be set (slirp4netns refuses connections to it);
//! 4. each network the grant lists: the main table (its default route, through slirp4netns);
//! 5. every non-global block ([`NON_GLOBAL_V4`]): prohibited (`EACCES`, "Permission denied").
//!
//! Everything else (a global address) reaches the main table's default route. Within slirp's
//! own network, the gateway and every other address are refused by slirp4netns itself
//! (`--disable-host-loopback`), whatever a listed network says.

use ipnet::Ipv4Net;
use std::net::Ipv4Addr;

/// slirp4netns's network (its default `--cidr`): the sandbox is `10.0.2.100`, the gateway
/// `10.0.2.2`, the DNS forwarder `10.0.2.3`.
pub const SLIRP_NETWORK: Ipv4Net = v4(10, 0, 2, 0, 24);
/// slirp4netns's gateway, the sandbox's default route.
pub const SLIRP_GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);
/// slirp4netns's DNS forwarder, the sandbox's only name server (`/etc/resolv.conf` inside).
pub const SLIRP_DNS: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 3);
/// The one port of [`SLIRP_DNS`] the sandbox may reach.
pub const DNS_PORT: u16 = 53;
/// The most networks one run may list (each is one rule).
pub const MAX_NETWORKS: usize = 1024;
/// The priority of the first rule; the next ones follow in order, all before the kernel's
/// rule for the main table (32766).
const FIRST_PRIORITY: u32 = 100;
/// `IPPROTO_UDP` and `IPPROTO_TCP`.
const UDP: u8 = 17;
const TCP: u8 = 6;

/// IPv4 blocks that are not global: the same blocks as brokerd's `http_fetch` refuses (its
/// `address` module; a test there checks that both lists agree).
pub const NON_GLOBAL_V4: [Ipv4Net; 16] = [
    v4(0, 0, 0, 0, 32),
    v4(0, 0, 0, 0, 8),
    v4(10, 0, 0, 0, 8),
    v4(100, 64, 0, 0, 10),
    v4(127, 0, 0, 0, 8),
    v4(169, 254, 0, 0, 16),
    v4(172, 16, 0, 0, 12),
    v4(192, 0, 0, 0, 24),
    v4(192, 0, 2, 0, 24),
    v4(192, 168, 0, 0, 16),
    v4(198, 18, 0, 0, 15),
    v4(198, 51, 100, 0, 24),
    v4(203, 0, 113, 0, 24),
    v4(224, 0, 0, 0, 4),
    v4(255, 255, 255, 255, 32),
    v4(240, 0, 0, 0, 4),
];

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

/// What a rule does with the packets it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Look the route up in the main table (slirp4netns's default route).
    Main,
    /// Refuse: the socket call fails with `EACCES`.
    Prohibit,
}

/// One routing-policy rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) priority: u32,
    pub(crate) to: Ipv4Net,
    /// The IP protocol and destination port it is limited to, when it is.
    pub(crate) port: Option<(u8, u16)>,
    pub(crate) action: Action,
}

/// The rules for a run that may reach `allowed` besides the global addresses, in order.
pub(crate) fn rules(allowed: &[Ipv4Net]) -> Vec<Rule> {
    let dns = Ipv4Net::from(SLIRP_DNS);
    let mut wanted = vec![
        (dns, Some((UDP, DNS_PORT)), Action::Main),
        (dns, Some((TCP, DNS_PORT)), Action::Main),
        (dns, None, Action::Prohibit),
        (Ipv4Net::from(SLIRP_GATEWAY), None, Action::Main),
    ];
    wanted.extend(allowed.iter().map(|net| (net.trunc(), None, Action::Main)));
    wanted.extend(
        NON_GLOBAL_V4
            .iter()
            .map(|net| (*net, None, Action::Prohibit)),
    );
    wanted
        .into_iter()
        .zip(FIRST_PRIORITY..)
        .map(|((to, port, action), priority)| Rule {
            priority,
            to,
            port,
            action,
        })
        .collect()
}

/// What the rules decide for a connection to `ip:port` over `protocol` (for the tests, and
/// to say it in a test's failure).
#[cfg(test)]
pub(crate) fn decide(rules: &[Rule], ip: Ipv4Addr, protocol: u8, port: u16) -> Option<Action> {
    rules
        .iter()
        .find(|r| r.to.contains(&ip) && r.port.is_none_or(|p| p == (protocol, port)))
        .map(|r| r.action)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn non_global_addresses_are_prohibited_and_global_ones_fall_through() {
        let rules = rules(&[]);
        for addr in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "192.0.2.2",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "10.0.2.1",
            "10.0.2.4",
        ] {
            assert_eq!(
                decide(&rules, ip(addr), TCP, 80),
                Some(Action::Prohibit),
                "{addr}"
            );
        }
        for addr in ["1.1.1.1", "93.184.215.14", "11.0.0.0", "172.32.0.1"] {
            assert_eq!(decide(&rules, ip(addr), TCP, 443), None, "{addr}");
        }
    }

    #[test]
    fn the_gateway_is_looked_up_so_that_the_default_route_through_it_can_be_set() {
        // slirp4netns itself refuses a connection to it (--disable-host-loopback).
        assert_eq!(
            decide(&rules(&[]), SLIRP_GATEWAY, TCP, 80),
            Some(Action::Main)
        );
    }

    #[test]
    fn the_dns_forwarder_answers_on_port_53_only() {
        let rules = rules(&["10.0.0.0/8".parse().unwrap()]);
        assert_eq!(decide(&rules, SLIRP_DNS, UDP, 53), Some(Action::Main));
        assert_eq!(decide(&rules, SLIRP_DNS, TCP, 53), Some(Action::Main));
        // Even a listed network that holds it does not open its other ports.
        assert_eq!(decide(&rules, SLIRP_DNS, TCP, 8080), Some(Action::Prohibit));
        assert_eq!(decide(&rules, SLIRP_DNS, UDP, 5353), Some(Action::Prohibit));
    }

    #[test]
    fn a_listed_network_is_reachable_and_only_it() {
        let rules = rules(&[
            "192.0.2.2/32".parse().unwrap(),
            "10.9.0.0/16".parse().unwrap(),
        ]);
        assert_eq!(decide(&rules, ip("192.0.2.2"), TCP, 80), Some(Action::Main));
        assert_eq!(
            decide(&rules, ip("192.0.2.3"), TCP, 80),
            Some(Action::Prohibit)
        );
        assert_eq!(decide(&rules, ip("10.9.255.1"), UDP, 1), Some(Action::Main));
        assert_eq!(
            decide(&rules, ip("10.8.0.1"), TCP, 80),
            Some(Action::Prohibit)
        );
        // A wider network opens the blocks inside it.
        let rules = super::rules(&["192.0.0.0/8".parse().unwrap()]);
        assert_eq!(
            decide(&rules, ip("192.168.1.1"), TCP, 22),
            Some(Action::Main)
        );
    }

    #[test]
    fn priorities_increase_in_order_before_the_main_table() {
        let rules = rules(&["192.0.2.0/24".parse().unwrap()]);
        assert!(rules.windows(2).all(|w| w[0].priority < w[1].priority));
        assert!(rules.last().unwrap().priority < 32766);
        // A host route given with bits beyond its prefix is the network it names.
        let rules = super::rules(&["192.0.2.7/24".parse().unwrap()]);
        assert_eq!(rules[4].to, "192.0.2.0/24".parse::<Ipv4Net>().unwrap());
    }
}
