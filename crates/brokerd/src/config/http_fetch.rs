//! `[http_fetch]`: settings of the `http_fetch` tool that hold for every grant.

use bxconfig::Problems;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;

/// `[http_fetch]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpFetchSettings {
    /// Host names answered from here instead of DNS (split-horizon setups, tests), matched
    /// case-insensitively. Only resolution is replaced: the addresses are checked against
    /// the grant like any others.
    pub resolve: BTreeMap<String, Vec<IpAddr>>,
}

impl HttpFetchSettings {
    /// Checks the section; the keys named are `http_fetch.resolve."name"`.
    pub(super) fn check(&self, p: &mut Problems) {
        for (name, addresses) in &self.resolve {
            let key = format!("http_fetch.resolve.{name:?}");
            if name.trim().is_empty() {
                p.push(&key, "a host name must not be empty");
            } else if name.parse::<IpAddr>().is_ok() {
                p.push(&key, "an IP address needs no resolving: name a host");
            } else if name.contains(['/', ':', '*', '?', '[', ']', '@']) {
                p.push(&key, "a host name only, without scheme, port, path or glob");
            }
            if let Some(same) = self
                .resolve
                .keys()
                .take_while(|other| *other != name)
                .find(|other| other.eq_ignore_ascii_case(name))
            {
                p.push(
                    &key,
                    format!("names the same host as {same:?} (names match case-insensitively)"),
                );
            }
            p.check(
                !addresses.is_empty(),
                &key,
                "must list at least one address",
            );
        }
    }
}
