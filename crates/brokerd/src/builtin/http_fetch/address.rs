//! Which addresses are not on the global internet, and so are refused unless a grant lists a
//! network that holds them: a name a grant allows may still resolve to the box's own loopback
//! or the owner's LAN, and a fetch there reads what was never meant to leave it.
//!
//! The tables follow IANA's special-purpose registries (RFC 6890 and its updates), keeping
//! every block that is not globally reachable. IPv6 forms that carry an IPv4 address (mapped
//! `::ffff:0:0/96`, compatible `::/96`, NAT64 `64:ff9b::/96`) are judged by that address, so
//! `::ffff:127.0.0.1` is loopback like `127.0.0.1`.

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4 blocks that are not global, with what they are. The first match names the address,
/// so a narrow block comes before the wide one that holds it. `exec`'s sandbox with network
/// prohibits the same blocks (`bxsandbox::net::NON_GLOBAL_V4`; a test checks both agree).
const V4: [(Ipv4Net, &str); 16] = [
    (v4(0, 0, 0, 0, 32), "unspecified"),
    (v4(0, 0, 0, 0, 8), "\"this network\""),
    (v4(10, 0, 0, 0, 8), "private"),
    (v4(100, 64, 0, 0, 10), "shared address space (CGNAT)"),
    (v4(127, 0, 0, 0, 8), "loopback"),
    (v4(169, 254, 0, 0, 16), "link-local"),
    (v4(172, 16, 0, 0, 12), "private"),
    (v4(192, 0, 0, 0, 24), "IETF protocol assignments"),
    (v4(192, 0, 2, 0, 24), "documentation"),
    (v4(192, 168, 0, 0, 16), "private"),
    (v4(198, 18, 0, 0, 15), "benchmarking"),
    (v4(198, 51, 100, 0, 24), "documentation"),
    (v4(203, 0, 113, 0, 24), "documentation"),
    (v4(224, 0, 0, 0, 4), "multicast"),
    (v4(255, 255, 255, 255, 32), "broadcast"),
    (v4(240, 0, 0, 0, 4), "reserved"),
];

/// IPv6 blocks that are not global, with what they are (after the forms that carry an IPv4
/// address were judged by it).
const V6: [(Ipv6Net, &str); 9] = [
    (v6([0, 0, 0, 0, 0, 0, 0, 0], 128), "unspecified"),
    (v6([0, 0, 0, 0, 0, 0, 0, 1], 128), "loopback"),
    (v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), "local-use NAT64"),
    (v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), "discard-only"),
    (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), "documentation"),
    (v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), "unique-local"),
    (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), "link-local"),
    (v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), "site-local"),
    (v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "multicast"),
];

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> Ipv4Net {
    Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len)
}

const fn v6(s: [u16; 8], len: u8) -> Ipv6Net {
    Ipv6Net::new_assert(
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
        len,
    )
}

/// The IPv4 address an IPv6 address carries: mapped (`::ffff:a.b.c.d`), NAT64
/// (`64:ff9b::a.b.c.d`) or compatible (`::a.b.c.d`, but not `::` or `::1`).
pub(crate) fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    // The low 32 bits, on purpose: that is where these forms put the IPv4 address.
    let tail = Ipv4Addr::from(u128::from(ip) as u32);
    let nat64 = s[..6] == [0x64, 0xff9b, 0, 0, 0, 0];
    let compatible = s[..6] == [0; 6] && u32::from(tail) > 1;
    (nat64 || compatible).then_some(tail)
}

/// What `ip` is when it is not a global address (`"loopback"`, `"private"`, ...); `None` for
/// a global one.
pub(crate) fn non_global(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => V4.iter().find(|(net, _)| net.contains(&v4)).map(|r| r.1),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => non_global(IpAddr::V4(v4)),
            None => V6.iter().find(|(net, _)| net.contains(&v6)).map(|r| r.1),
        },
    }
}

/// Whether one of `networks` holds `ip`, or the IPv4 address it carries.
pub(crate) fn in_networks(networks: &[IpNet], ip: IpAddr) -> bool {
    let carried = match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map(IpAddr::V4),
        IpAddr::V4(_) => None,
    };
    networks
        .iter()
        .any(|net| net.contains(&ip) || carried.is_some_and(|v4| net.contains(&v4)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Each row: an address in a block, and what it is.
    #[test]
    fn every_non_global_block_is_refused_by_name() {
        let cases = [
            ("0.0.0.0", "unspecified"),
            ("0.1.2.3", "\"this network\""),
            ("10.0.0.1", "private"),
            ("10.255.255.255", "private"),
            ("100.64.0.1", "shared address space (CGNAT)"),
            ("100.127.255.255", "shared address space (CGNAT)"),
            ("127.0.0.1", "loopback"),
            ("127.255.255.254", "loopback"),
            ("169.254.169.254", "link-local"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.0.0.8", "IETF protocol assignments"),
            ("192.0.2.1", "documentation"),
            ("192.168.1.1", "private"),
            ("198.18.0.1", "benchmarking"),
            ("198.19.255.255", "benchmarking"),
            ("198.51.100.7", "documentation"),
            ("203.0.113.9", "documentation"),
            ("224.0.0.1", "multicast"),
            ("239.255.255.255", "multicast"),
            ("240.0.0.1", "reserved"),
            ("255.255.255.254", "reserved"),
            ("255.255.255.255", "broadcast"),
            ("::", "unspecified"),
            ("::1", "loopback"),
            ("64:ff9b:1::1", "local-use NAT64"),
            ("100::1", "discard-only"),
            ("2001:db8::1", "documentation"),
            ("fc00::1", "unique-local"),
            ("fd12:3456::1", "unique-local"),
            ("fe80::1", "link-local"),
            ("febf::1", "link-local"),
            ("fec0::1", "site-local"),
            ("ff02::1", "multicast"),
            ("ff0e::1", "multicast"),
            // IPv4 carried in IPv6 is judged by the IPv4 address.
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:0.0.0.0", "unspecified"),
            ("::127.0.0.1", "loopback"),
            ("::192.168.0.1", "private"),
            ("64:ff9b::127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
        ];
        for (addr, what) in cases {
            assert_eq!(non_global(ip(addr)), Some(what), "{addr}");
        }
    }

    #[test]
    fn global_addresses_pass_including_the_edges_of_blocks() {
        for addr in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.215.14",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "126.255.255.255",
            "128.0.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.0",
            "192.167.255.255",
            "192.169.0.0",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "fbff:ffff::1",
            "fe7f::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "::8.8.8.8",
        ] {
            assert_eq!(non_global(ip(addr)), None, "{addr}");
        }
    }

    #[test]
    fn execs_sandbox_refuses_the_same_ipv4_blocks() {
        let ours: Vec<Ipv4Net> = V4.iter().map(|(net, _)| *net).collect();
        assert_eq!(ours, bxsandbox::net::NON_GLOBAL_V4.to_vec());
    }

    #[test]
    fn networks_hold_addresses_and_the_ipv4_they_carry() {
        let nets = ["127.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()];
        assert!(in_networks(&nets, ip("127.0.0.1")));
        assert!(in_networks(&nets, ip("::ffff:127.0.0.1")));
        assert!(in_networks(&nets, ip("fd00::5")));
        assert!(!in_networks(&nets, ip("::1")));
        assert!(!in_networks(&nets, ip("10.0.0.1")));
        assert!(!in_networks(&[], ip("127.0.0.1")));
    }
}
