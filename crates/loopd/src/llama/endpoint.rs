//! Where llama-server listens: `http://host:port[/prefix]`, `https://host:port[/prefix]` or
//! `unix:/path/to.sock`.

use std::fmt;
use std::path::PathBuf;

use super::error::InferError;

/// The prefix of a Unix socket URL.
pub const UNIX_PREFIX: &str = "unix:";
/// The port of an `http://` URL without one.
const DEFAULT_HTTP_PORT: u16 = 80;
/// The port of an `https://` URL without one.
const DEFAULT_HTTPS_PORT: u16 = 443;

/// A parsed llama-server base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// HTTP over TCP, inside TLS for `https://`.
    Tcp {
        /// The host name or address (without brackets for IPv6).
        host: String,
        /// The port.
        port: u16,
        /// A path prefix before the API paths (empty, or starting with `/` without a trailing
        /// `/`).
        base_path: String,
        /// Whether the connection is TLS (`https://`): the server's certificate is checked
        /// for `host` (see `ClientOptions::tls`).
        tls: bool,
    },
    /// HTTP over a Unix socket.
    Unix {
        /// The socket path.
        path: PathBuf,
    },
}

impl Endpoint {
    /// Parses `http://host[:port][/prefix]` (port 80 by default),
    /// `https://host[:port][/prefix]` (port 443 by default) or `unix:/path/to.sock`; an error
    /// names the setting `llama.url`.
    pub fn parse(url: &str) -> Result<Endpoint, InferError> {
        Endpoint::parse_setting("llama.url", url)
    }

    /// [`Endpoint::parse`], with an error naming the setting `key` (e.g.
    /// `llama.endpoints[1] (cupboard).url`) instead of `llama.url`.
    pub fn parse_setting(key: &str, url: &str) -> Result<Endpoint, InferError> {
        let bad = |why: String| InferError::BadConfig {
            message: format!("{key} {url:?}: {why}"),
        };
        if let Some(path) = url.strip_prefix(UNIX_PREFIX) {
            if path.is_empty() {
                return Err(bad("the socket path is empty".into()));
            }
            return Ok(Endpoint::Unix {
                path: PathBuf::from(path),
            });
        }
        let uri: http::Uri = url.parse().map_err(|e| bad(format!("not a URL ({e})")))?;
        let (tls, default_port) = match uri.scheme_str() {
            Some("http") => (false, DEFAULT_HTTP_PORT),
            Some("https") => (true, DEFAULT_HTTPS_PORT),
            _ => return Err(bad("must start with http://, https:// or unix:".into())),
        };
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| bad("has no host".into()))?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if uri.query().is_some() {
            return Err(bad("must not have a query".into()));
        }
        Ok(Endpoint::Tcp {
            host: host.to_owned(),
            port: uri.port_u16().unwrap_or(default_port),
            base_path: uri.path().trim_end_matches('/').to_owned(),
            tls,
        })
    }

    /// Whether the endpoint is reached over TLS (`https://`).
    pub fn is_tls(&self) -> bool {
        matches!(self, Endpoint::Tcp { tls: true, .. })
    }

    /// The `Host` header value.
    pub(crate) fn host_header(&self) -> String {
        match self {
            Endpoint::Tcp { host, port, .. } if host.contains(':') => format!("[{host}]:{port}"),
            Endpoint::Tcp { host, port, .. } => format!("{host}:{port}"),
            Endpoint::Unix { .. } => "localhost".to_owned(),
        }
    }

    /// The request target for an API path such as `/health`.
    pub(crate) fn target(&self, path: &str) -> String {
        match self {
            Endpoint::Tcp { base_path, .. } => format!("{base_path}{path}"),
            Endpoint::Unix { .. } => path.to_owned(),
        }
    }
}

impl fmt::Display for Endpoint {
    /// The URL, as it would be written in the config.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::Tcp { base_path, tls, .. } => {
                let scheme = if *tls { "https" } else { "http" };
                write!(f, "{scheme}://{}{base_path}", self.host_header())
            }
            Endpoint::Unix { path } => write!(f, "{UNIX_PREFIX}{}", path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn llama_endpoint_parses_tcp_and_unix() {
        let e = Endpoint::parse("http://127.0.0.1:8080").unwrap();
        assert!(!e.is_tls());
        assert_eq!(e.target("/health"), "/health");
        assert_eq!(e.host_header(), "127.0.0.1:8080");
        assert_eq!(e.to_string(), "http://127.0.0.1:8080");
        let e = Endpoint::parse("http://[::1]/llama/").unwrap();
        assert_eq!(e.target("/props"), "/llama/props");
        assert_eq!(e.to_string(), "http://[::1]:80/llama");
        let e = Endpoint::parse("unix:/run/llama.sock").unwrap();
        assert_eq!(
            e,
            Endpoint::Unix {
                path: "/run/llama.sock".into()
            }
        );
        assert_eq!(e.to_string(), "unix:/run/llama.sock");
        assert!(!e.is_tls());
    }

    #[test]
    fn llama_endpoint_parses_https_with_port_443_by_default() {
        let e = Endpoint::parse("https://gpu.lan/llama/").unwrap();
        assert_eq!(
            e,
            Endpoint::Tcp {
                host: "gpu.lan".into(),
                port: 443,
                base_path: "/llama".into(),
                tls: true,
            }
        );
        assert!(e.is_tls());
        assert_eq!(e.target("/health"), "/llama/health");
        assert_eq!(e.to_string(), "https://gpu.lan:443/llama");
        let e = Endpoint::parse("https://[::1]:8443").unwrap();
        assert_eq!(e.host_header(), "[::1]:8443");
        assert_eq!(e.to_string(), "https://[::1]:8443");
    }

    #[test]
    fn llama_endpoint_errors_name_the_setting_given() {
        let e =
            Endpoint::parse_setting("llama.endpoints[1] (cupboard).url", "ftp://h").unwrap_err();
        assert!(
            e.to_string()
                .contains("llama.endpoints[1] (cupboard).url \"ftp://h\""),
            "{e}"
        );
    }

    #[test]
    fn llama_endpoint_refuses_what_it_cannot_reach() {
        for bad in [
            "",
            "unix:",
            "ftp://h",
            "https://",
            "https://h/?q=1",
            "127.0.0.1:8080",
            "http://h/?q=1",
        ] {
            let e = Endpoint::parse(bad).unwrap_err();
            assert!(matches!(e, InferError::BadConfig { .. }), "{bad}: {e:?}");
            assert!(e.to_string().contains("llama.url"), "{e}");
        }
    }
}
