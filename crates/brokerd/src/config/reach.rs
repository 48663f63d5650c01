//! Where an `http_fetch` grant may reach: its `hosts` entries (a glob, optionally with a port or
//! as a `scheme://host[:port]` URL), its `ports` and its `networks`. Parsed here once for the
//! config check and again by the tool, so both read an entry the same way. An `exec` grant with
//! `network = true` takes `networks` too, with the same meaning ([`check_exec_networks`]).

use super::exec::EXEC_TOOL;
use super::grant::HOST_TOOLS;
use bxconfig::Problems;
use ipnet::IpNet;
use std::net::IpAddr;

/// The ports a grant's host globs may be fetched on when the grant sets no `ports`.
pub const DEFAULT_PORTS: [u16; 2] = [80, 443];

/// One `hosts` entry, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostEntry {
    /// The glob over host names (an IPv6 address without its brackets).
    pub glob: String,
    /// The one port the entry allows; `None`: the grant's `ports`.
    pub port: Option<u16>,
    /// `http` or `https` when the entry is a URL: only that scheme; `None`: either.
    pub scheme: Option<&'static str>,
}

impl HostEntry {
    /// Parses `host`, `host:port`, `[v6]`, `[v6]:port`, a bare IPv6 address, or
    /// `http(s)://` and one of those (no path, query or user); the error says what is wrong.
    /// A URL without a port allows its scheme's default port only.
    pub fn parse(entry: &str) -> Result<HostEntry, String> {
        let (scheme, rest) = match entry.split_once("://") {
            Some((s, rest)) if s.eq_ignore_ascii_case("http") => (Some("http"), rest),
            Some((s, rest)) if s.eq_ignore_ascii_case("https") => (Some("https"), rest),
            Some((s, _)) => {
                return Err(format!(
                    "only http:// and https:// URLs can name a host, not {s}://"
                ));
            }
            None => (None, entry),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '#', '@']) {
            return Err(
                "a host, host:port or scheme://host[:port], without path, query or user"
                    .to_string(),
            );
        }
        let (glob, port) = split_port(authority)?;
        if glob.trim().is_empty() {
            return Err("names no host".to_string());
        }
        let port = port.or(match scheme {
            Some("http") => Some(80),
            Some(_) => Some(443),
            None => None,
        });
        Ok(HostEntry {
            glob: glob.to_string(),
            port,
            scheme,
        })
    }
}

/// Splits `authority` into its host and port: `[v6]:port`, a bare IPv6 address (no port),
/// or `host:port`.
fn split_port(authority: &str) -> Result<(&str, Option<u16>), String> {
    if let Some(inner) = authority.strip_prefix('[') {
        let Some((host, after)) = inner.split_once(']') else {
            return Err("an IPv6 address opened with [ must close with ]".to_string());
        };
        return match after {
            "" => Ok((host, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((host, Some(parse_port(port)?))),
                None => Err("only :port may follow ]".to_string()),
            },
        };
    }
    match authority.matches(':').count() {
        0 => Ok((authority, None)),
        1 => {
            let (host, port) = authority.split_once(':').unwrap_or((authority, ""));
            Ok((host, Some(parse_port(port)?)))
        }
        // Two or more: an IPv6 address, which takes a port only in brackets.
        _ => Ok((authority, None)),
    }
}

/// A port from 1 to 65535.
fn parse_port(port: &str) -> Result<u16, String> {
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(format!(
            "the port must be a number from 1 to 65535, not {port:?}"
        )),
        Ok(port) => Ok(port),
    }
}

/// Parses a `networks` entry: a CIDR (`127.0.0.0/8`, `fd00::/8`) or one address (as /32 or
/// /128).
pub fn parse_network(network: &str) -> Result<IpNet, String> {
    let network = network.trim();
    network
        .parse::<IpNet>()
        .or_else(|_| network.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| {
            format!("not a network: want a CIDR such as 127.0.0.0/8 or fd00::/8, not {network:?}")
        })
}

/// Checks the `hosts`, `ports` and `networks` of grant `i`, whose tool takes hosts when
/// `host_tool`; the keys named are `grants[i].hosts[j]` and so on.
pub(super) fn check(
    i: usize,
    tool: &str,
    host_tool: bool,
    hosts: &[String],
    ports: &[u16],
    networks: &[String],
    p: &mut Problems,
) {
    let key = |name: &str| format!("grants[{i}].{name}");
    if host_tool {
        p.check(
            !hosts.is_empty(),
            key("hosts"),
            format!("{tool} needs at least one host glob: with none, every call would be denied"),
        );
        p.check(
            !ports.is_empty(),
            key("ports"),
            "must list at least one port; leave it out for 80 and 443",
        );
    } else {
        for (name, empty) in [
            ("hosts", hosts.is_empty()),
            ("ports", ports.is_empty()),
            // exec's are checked by `check_exec_networks`.
            ("networks", networks.is_empty() || tool == EXEC_TOOL),
        ] {
            p.check(
                empty,
                key(name),
                format!(
                    "only {} take {name}; {tool} cannot be limited by them",
                    HOST_TOOLS.join(", ")
                ),
            );
        }
    }
    for (j, host) in hosts.iter().enumerate() {
        let host_key = format!("grants[{i}].hosts[{j}]");
        match HostEntry::parse(host) {
            Ok(entry) => super::grant::check_glob(&host_key, &entry.glob, p),
            Err(e) => p.push(&host_key, format!("{host:?}: {e}")),
        }
    }
    for (j, port) in ports.iter().enumerate() {
        p.check(
            *port != 0,
            format!("grants[{i}].ports[{j}]"),
            "port 0 cannot be connected to; ports run from 1 to 65535",
        );
    }
    for (j, network) in networks.iter().enumerate() {
        if let Err(e) = parse_network(network) {
            p.push(format!("grants[{i}].networks[{j}]"), e);
        }
    }
}

/// Checks the `networks` of exec grant `i`: they need `network = true`, and each must be an
/// IPv4 network the sandbox's network can reach (`bxsandbox::net`): not IPv6 (it has none),
/// not within 127.0.0.0/8 (the sandbox's own loopback, never the box's) nor within
/// slirp4netns's own network.
pub(super) fn check_exec_networks(i: usize, network: bool, networks: &[String], p: &mut Problems) {
    p.check(
        network || networks.is_empty(),
        format!("grants[{i}].networks"),
        "exec takes networks only with network = true (without it nothing is reachable)",
    );
    let loopback: IpNet = ipnet::Ipv4Net::new_assert(std::net::Ipv4Addr::LOCALHOST, 8)
        .trunc()
        .into();
    let slirp = IpNet::V4(bxsandbox::net::SLIRP_NETWORK);
    for (j, entry) in networks.iter().enumerate() {
        let key = format!("grants[{i}].networks[{j}]");
        let Ok(net) = parse_network(entry) else {
            continue; // `check` says why
        };
        if matches!(net, IpNet::V6(_)) {
            p.push(
                key,
                format!(
                    "{entry}: exec's network has no IPv6 (slirp4netns runs without it); \
                     list IPv4 networks"
                ),
            );
        } else if loopback.contains(&net) {
            p.push(
                key,
                format!(
                    "{entry}: inside exec's sandbox 127.0.0.0/8 is its own loopback; the box's \
                     loopback services cannot be granted to exec"
                ),
            );
        } else if slirp.contains(&net) {
            p.push(
                key,
                format!(
                    "{entry}: {slirp} is the sandbox network's own (slirp4netns); no address of \
                     the box or its LAN there can be reached from exec"
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn entry(glob: &str, port: Option<u16>, scheme: Option<&'static str>) -> HostEntry {
        HostEntry {
            glob: glob.to_string(),
            port,
            scheme,
        }
    }

    #[test]
    fn host_entries_carry_an_optional_port_and_scheme() {
        let cases = [
            ("*.example.org", entry("*.example.org", None, None)),
            ("example.org:8080", entry("example.org", Some(8080), None)),
            (
                "http://example.org:8080",
                entry("example.org", Some(8080), Some("http")),
            ),
            (
                "HTTPS://example.org/",
                entry("example.org", Some(443), Some("https")),
            ),
            (
                "http://example.org",
                entry("example.org", Some(80), Some("http")),
            ),
            ("::1", entry("::1", None, None)),
            ("[::1]", entry("::1", None, None)),
            ("[::1]:8080", entry("::1", Some(8080), None)),
        ];
        for (text, want) in cases {
            assert_eq!(HostEntry::parse(text).unwrap(), want, "{text}");
        }
    }

    #[test]
    fn bad_host_entries_say_why() {
        for (text, why) in [
            ("ftp://example.org", "only http:// and https://"),
            ("https://example.org/path", "without path"),
            ("http://u@example.org", "without path, query or user"),
            ("example.org:0", "from 1 to 65535"),
            ("example.org:http", "from 1 to 65535"),
            ("example.org:99999", "from 1 to 65535"),
            ("[::1", "must close with ]"),
            ("[::1]x", "only :port"),
            (":80", "names no host"),
        ] {
            let e = HostEntry::parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn exec_networks_need_network_and_an_ipv4_network_the_sandbox_can_reach() {
        let problems = |network: bool, entries: &[&str]| {
            let mut p = Problems::new();
            let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
            check_exec_networks(0, network, &entries, &mut p);
            p.finish()
                .err()
                .unwrap_or_default()
                .into_iter()
                .map(|x| format!("{}: {}", x.key, x.message))
                .collect::<Vec<_>>()
        };
        assert!(problems(true, &["192.168.1.0/24", "10.9.0.1", "0.0.0.0/0"]).is_empty());
        // exec takes networks, where another tool without hosts may not.
        let networks = ["10.0.0.0/8".to_owned()];
        let mut p = Problems::new();
        check(0, EXEC_TOOL, false, &[], &[], &networks, &mut p);
        assert!(p.is_empty());
        check(0, "read_file", false, &[], &[], &networks, &mut p);
        assert!(!p.is_empty());
        assert!(problems(false, &[]).is_empty());
        let found = problems(false, &["192.168.1.0/24"]);
        assert!(found[0].contains("only with network = true"), "{found:?}");
        for (entry, why) in [
            ("fd00::/8", "no IPv6"),
            ("127.0.0.1", "its own loopback"),
            ("127.0.0.0/8", "its own loopback"),
            ("10.0.2.3", "the sandbox network's own"),
        ] {
            let found = problems(true, &[entry]);
            assert!(
                found.len() == 1 && found[0].contains(why),
                "{entry}: {found:?}"
            );
        }
    }

    #[test]
    fn networks_are_cidrs_or_single_addresses() {
        assert_eq!(
            parse_network("127.0.0.0/8").unwrap(),
            "127.0.0.0/8".parse::<IpNet>().unwrap()
        );
        assert_eq!(
            parse_network("10.1.2.3").unwrap(),
            "10.1.2.3/32".parse::<IpNet>().unwrap()
        );
        assert_eq!(
            parse_network("fd00::/8").unwrap(),
            "fd00::/8".parse::<IpNet>().unwrap()
        );
        for bad in ["", "localhost", "10.0.0.0/33", "10.0.0/8"] {
            let e = parse_network(bad).unwrap_err();
            assert!(e.contains("not a network"), "{bad}: {e}");
        }
    }
}
