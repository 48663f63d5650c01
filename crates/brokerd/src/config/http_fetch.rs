//! `[http_fetch]`: settings of the `http_fetch` tool that hold for every grant, and the
//! `http_fetch` keys of a grant ([`HttpGrant`]).

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

/// The methods an `http_fetch` grant may allow.
pub const HTTP_METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];

/// What an `http_fetch` grant allows when it does not say: GET only.
pub const DEFAULT_METHODS: [&str; 1] = ["GET"];

/// Headers neither a grant nor the model may set: brokerd writes them itself (`Host`,
/// `Content-Length`, `User-Agent`), or they change how the connection is used.
pub const RESERVED_HEADERS: [&str; 11] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
    "user-agent",
];

/// The `http_fetch` keys of a grant (all unset on a grant of another tool).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpGrant {
    /// The methods the model may use ([`DEFAULT_METHODS`] when the grant does not say).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
    /// Headers brokerd attaches to every request of this grant to the URL's own origin; a
    /// value may hold `{secret:NAME}` placeholders (`docs/secrets.md`). The model never sees
    /// them and may not set a header of the same name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Whether headers holding a secret may go over plain `http://` (default: https only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub allow_http_secrets: bool,
}

impl HttpGrant {
    /// Whether a header of this grant holds a secret.
    pub fn injects_secret(&self) -> bool {
        self.headers
            .values()
            .any(|value| crate::secrets::template::mentions_secret(value))
    }

    /// Checks the keys of the `i`th grant, of `tool`. Placeholders are checked by the
    /// config, which knows the `[[secrets]]`.
    pub(super) fn check(&self, i: usize, tool: &str, p: &mut Problems) {
        let key = |name: &str| format!("grants[{i}].{name}");
        if tool != "http_fetch" {
            for (name, set) in [
                ("methods", !self.methods.is_empty()),
                ("headers", !self.headers.is_empty()),
                ("allow_http_secrets", self.allow_http_secrets),
            ] {
                p.check(
                    !set,
                    key(name),
                    format!("only http_fetch takes {name}; {tool} does not"),
                );
            }
            return;
        }
        p.check(
            !self.methods.is_empty(),
            key("methods"),
            "must name at least one method (leave it out for GET only)",
        );
        for (j, method) in self.methods.iter().enumerate() {
            p.check(
                HTTP_METHODS.contains(&method.as_str()),
                format!("grants[{i}].methods[{j}]"),
                format!("{method:?} is not one of {}", HTTP_METHODS.join(", ")),
            );
        }
        for (name, value) in &self.headers {
            let at = format!("grants[{i}].headers.{name}");
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                p.push(&at, "not a valid header name");
            } else if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                p.push(&at, "brokerd sets this header itself; a grant may not");
            }
            if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                p.push(&at, "a header value may not hold CR, LF or NUL");
            }
        }
    }
}
