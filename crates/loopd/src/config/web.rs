//! `[web]`: the web console, the owner's view of the box from a browser (`docs/web.md`).
//! Off unless `listen` is set; loopback only unless `allow_remote`.

use bxconfig::Problems;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// The most browser sessions a `max_sessions` may allow.
pub const MAX_WEB_SESSIONS: usize = 256;

/// `[web]`: where the console listens, what a browser calls it, and how long sign-ins last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Web {
    /// Where the console is served over HTTP (`"127.0.0.1:8740"`); unset, it is off.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// Allows a `listen` address that is not loopback. The console shows every session: reach
    /// it from elsewhere through a reverse proxy with TLS or an SSH tunnel instead.
    pub allow_remote: bool,
    /// The console's address as a browser sees it (`"https://box.example.com"` behind a
    /// reverse proxy): the sign-in link starts with it, a state-changing request must come from
    /// it, and an https origin makes the cookie `Secure`. Unset: `http://<listen>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// How long a browser stays signed in, in milliseconds.
    pub session_ttl_ms: u64,
    /// How long a sign-in link from `boxctl web` can be used, in milliseconds (once).
    pub link_ttl_ms: u64,
    /// The most browsers signed in at once; a new sign-in past it ends the oldest.
    pub max_sessions: usize,
    /// The largest request body the console reads (a task's text, a denial's reason), in
    /// bytes; a larger one gets 413.
    pub max_body_bytes: usize,
}

impl Default for Web {
    fn default() -> Web {
        Web {
            listen: None,
            allow_remote: false,
            origin: None,
            session_ttl_ms: 12 * 60 * 60 * 1000,
            link_ttl_ms: 5 * 60 * 1000,
            max_sessions: 16,
            max_body_bytes: 256 * 1024,
        }
    }
}

/// A console's origin: scheme, host and port, as a browser writes it in `Origin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `http` or `https`.
    pub https: bool,
    /// `host` or `host:port`, as written (lower case).
    pub authority: String,
}

impl Origin {
    /// Parses `scheme://host[:port]` (a trailing `/` allowed; no path, query, or user).
    pub fn parse(text: &str) -> Result<Origin, String> {
        let (https, rest) = if let Some(rest) = text.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = text.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!("{text:?} must start with http:// or https://"));
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        let allowed = |c: char| c.is_ascii_alphanumeric() || "-.:[]".contains(c);
        let split = bxhttp::host::split_port(authority);
        let (Some((host, port)), true) = (split, authority.chars().all(allowed)) else {
            return Err(format!(
                "{text:?} must be scheme://host[:port] with nothing after the host and port"
            ));
        };
        // A browser leaves the scheme's default port out of `Host`, `Origin` and the address
        // bar: so does the origin, or the console would refuse the very browser it names.
        let default_port = if https { 443 } else { 80 };
        let authority = match port {
            Some(port) if port != default_port => format!("{host}:{port}"),
            _ => host.to_string(),
        };
        Ok(Origin {
            https,
            authority: authority.to_ascii_lowercase(),
        })
    }

    /// The origin as a browser sends it: `https://host[:port]`.
    pub fn as_url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.authority)
    }
}

impl Web {
    /// The console's origin: `origin`, else `http://<listen>`; `None` when the console is off.
    pub fn resolved_origin(&self) -> Option<Origin> {
        let listen = self.listen?;
        match &self.origin {
            Some(text) => Origin::parse(text).ok(),
            None => Some(Origin {
                https: false,
                authority: listen.to_string(),
            }),
        }
    }

    pub(super) fn check(&self, p: &mut Problems) {
        if let Some(addr) = self.listen
            && !addr.ip().is_loopback()
            && !self.allow_remote
        {
            p.push(
                "web.listen",
                format!(
                    "\"{addr}\" is not a loopback address: the console is served on loopback \
                     only unless web.allow_remote = true (a reverse proxy or an SSH tunnel is \
                     the way in from elsewhere: docs/web.md)"
                ),
            );
        }
        if let Some(origin) = &self.origin
            && let Err(why) = Origin::parse(origin)
        {
            p.push("web.origin", why);
        }
        p.at_least("web.session_ttl_ms", self.session_ttl_ms, 1_000);
        p.at_least("web.link_ttl_ms", self.link_ttl_ms, 1_000);
        p.at_least("web.max_sessions", self.max_sessions, 1);
        p.at_least("web.max_body_bytes", self.max_body_bytes, 1024);
        p.check(
            self.max_sessions <= MAX_WEB_SESSIONS,
            "web.max_sessions",
            format!("must be at most {MAX_WEB_SESSIONS}"),
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn problems(web: &Web) -> Vec<String> {
        let mut p = Problems::new();
        web.check(&mut p);
        p.finish()
            .err()
            .unwrap_or_default()
            .into_iter()
            .map(|p| format!("{}: {}", p.key, p.message))
            .collect()
    }

    #[test]
    fn off_by_default_and_loopback_only_unless_allowed() {
        let web = Web::default();
        assert_eq!(web.listen, None);
        assert_eq!(web.resolved_origin(), None);
        assert!(problems(&web).is_empty());
        let remote = Web {
            listen: Some("0.0.0.0:8740".parse().unwrap()),
            ..Web::default()
        };
        let found = problems(&remote).join("\n");
        assert!(
            found.contains("web.listen") && found.contains("allow_remote"),
            "{found}"
        );
        let allowed = Web {
            allow_remote: true,
            ..remote
        };
        assert!(problems(&allowed).is_empty());
    }

    #[test]
    fn the_origin_defaults_to_the_listen_address_and_a_bad_one_is_named() {
        let web = Web {
            listen: Some("127.0.0.1:8740".parse().unwrap()),
            ..Web::default()
        };
        assert_eq!(
            web.resolved_origin().unwrap().as_url(),
            "http://127.0.0.1:8740"
        );
        let proxied = Web {
            origin: Some("https://Box.Example.com/".into()),
            ..web.clone()
        };
        let origin = proxied.resolved_origin().unwrap();
        assert!(origin.https);
        assert_eq!(origin.as_url(), "https://box.example.com");
        let default_port = Web {
            origin: Some("https://box.example.com:443".into()),
            ..web.clone()
        };
        assert_eq!(
            default_port.resolved_origin().unwrap().as_url(),
            "https://box.example.com"
        );
        let http_port = Web {
            origin: Some("http://box:8080".into()),
            ..web.clone()
        };
        assert_eq!(http_port.resolved_origin().unwrap().authority, "box:8080");
        for bad in [
            "box.example.com",
            "https://box/path",
            "ftp://x",
            "https://u@x",
            "https://box:port",
            "https://:8740",
        ] {
            let found = problems(&Web {
                origin: Some(bad.into()),
                ..web.clone()
            })
            .join("\n");
            assert!(found.contains("web.origin"), "{bad}: {found}");
        }
    }

    #[test]
    fn limits_are_checked() {
        let web = Web {
            session_ttl_ms: 0,
            link_ttl_ms: 5,
            max_sessions: 0,
            max_body_bytes: 10,
            ..Web::default()
        };
        let found = problems(&web).join("\n");
        for key in [
            "web.session_ttl_ms",
            "web.link_ttl_ms",
            "web.max_sessions",
            "web.max_body_bytes",
        ] {
            assert!(found.contains(key), "{key}: {found}");
        }
        assert!(serde_json::from_str::<Web>(r#"{"port": 1}"#).is_err());
    }
}
