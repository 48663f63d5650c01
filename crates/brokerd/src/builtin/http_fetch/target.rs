//! What `http_fetch` fetches: a URL taken apart ([`Target`]), and a redirect's `Location`
//! resolved against it.

use http::Uri;

/// The longest URL `http_fetch` takes (and follows in a redirect), in bytes.
pub const MAX_URL_BYTES: usize = 8192;

/// The schemes `http_fetch` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// Plain HTTP/1.1 over TCP.
    Http,
    /// HTTP/1.1 over TLS.
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// One URL to fetch, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// `http` or `https`.
    pub scheme: Scheme,
    /// The host, lower case, an IPv6 address without its brackets: what the allow-list is
    /// matched against and what is connected to.
    pub host: String,
    /// The port (the scheme's default when the URL gives none).
    pub port: u16,
    /// The URL's authority as written (`host[:port]`), for the `Host` header and messages.
    pub authority: String,
    /// The path and query (`/` when the URL has none); the fragment is dropped.
    pub path_and_query: String,
}

impl Target {
    /// Parses an absolute `http://` or `https://` URL; the error says why it is not one.
    pub(crate) fn parse(url: &str) -> Result<Target, String> {
        if url.len() > MAX_URL_BYTES {
            return Err(format!(
                "the URL is {} bytes long; the most is {MAX_URL_BYTES}",
                url.len()
            ));
        }
        let without_fragment = url.split_once('#').map_or(url, |(u, _)| u);
        let uri: Uri = without_fragment
            .parse()
            .map_err(|e| format!("not a valid URL ({e}): {url:?}"))?;
        let scheme = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => Scheme::Http,
            Some(s) if s.eq_ignore_ascii_case("https") => Scheme::Https,
            Some(s) => {
                return Err(format!(
                    "only http:// and https:// URLs can be fetched, not {s}:"
                ));
            }
            None => return Err(format!("not an absolute http(s) URL: {url:?}")),
        };
        let Some(authority) = uri.authority() else {
            return Err(format!("the URL names no host: {url:?}"));
        };
        if authority.as_str().contains('@') {
            return Err("a URL with user information (user@host) is not supported".to_string());
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if host.is_empty() {
            return Err(format!("the URL names no host: {url:?}"));
        }
        let path_and_query = match uri.path_and_query().map(|pq| pq.as_str()) {
            None | Some("") => "/".to_string(),
            Some(pq) => pq.to_string(),
        };
        Ok(Target {
            scheme,
            host,
            port: authority.port_u16().unwrap_or(scheme.default_port()),
            authority: authority.as_str().to_string(),
            path_and_query,
        })
    }

    /// The URL, for messages.
    pub(crate) fn url(&self) -> String {
        format!(
            "{}://{}{}",
            self.scheme.as_str(),
            self.authority,
            self.path_and_query
        )
    }

    /// The target a redirect's `Location` value points to, resolved against this one: an
    /// absolute URL, `//host/path`, `/path`, `?query` or a path relative to this one's
    /// directory.
    pub(crate) fn join(&self, location: &str) -> Result<Target, String> {
        let location = location.trim();
        let location = location.split_once('#').map_or(location, |(l, _)| l);
        if has_scheme(location) {
            return Target::parse(location);
        }
        let scheme = self.scheme.as_str();
        if location.starts_with("//") {
            return Target::parse(&format!("{scheme}:{location}"));
        }
        let path = self
            .path_and_query
            .split_once('?')
            .map_or(self.path_and_query.as_str(), |(p, _)| p);
        let joined = if location.starts_with('/') {
            location.to_string()
        } else if location.starts_with('?') || location.is_empty() {
            format!("{path}{location}")
        } else {
            let dir = path.rfind('/').map_or("/", |i| &path[..=i]);
            format!("{dir}{location}")
        };
        Target::parse(&format!("{scheme}://{}{joined}", self.authority))
    }
}

/// Whether `reference` starts with a URL scheme (`letter *(letter / digit / + / - / .) ":"`).
fn has_scheme(reference: &str) -> bool {
    let Some((scheme, _)) = reference.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parses_host_port_and_path() {
        let t = Target::parse("HTTP://Example.ORG:8080/a/b?q=1#frag").unwrap();
        assert_eq!(t.scheme, Scheme::Http);
        assert_eq!(t.host, "example.org");
        assert_eq!(t.port, 8080);
        assert_eq!(t.path_and_query, "/a/b?q=1");
        let t = Target::parse("https://[::1]").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path_and_query.as_str()),
            ("::1", 443, "/")
        );
    }

    #[test]
    fn refuses_other_schemes_relative_urls_and_user_info() {
        for bad in [
            "ftp://example.org/",
            "file:///etc/passwd",
            "/just/a/path",
            "example.org",
            "http://user:pw@example.org/",
            "http://exa mple.org/",
        ] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
        assert!(Target::parse(&format!("http://a/{}", "x".repeat(MAX_URL_BYTES))).is_err());
    }

    #[test]
    fn joins_every_kind_of_location() {
        let base = Target::parse("http://a.example:81/dir/page?x=1").unwrap();
        let url = |l: &str| base.join(l).unwrap().url();
        assert_eq!(url("https://b.example/z"), "https://b.example/z");
        assert_eq!(url("//c.example/y"), "http://c.example/y");
        assert_eq!(url("/root"), "http://a.example:81/root");
        assert_eq!(url("other"), "http://a.example:81/dir/other");
        assert_eq!(url("?y=2"), "http://a.example:81/dir/page?y=2");
        assert!(base.join("javascript:alert(1)").is_err());
    }
}
