//! The names a request gives the server it is for: its one `Host` field and, when its target
//! is in absolute form (`GET http://name/path`), the target's authority, which then names the
//! server (RFC 9112, 3.2.2). A server on a TCP port checks both against its own names, so a
//! page of another site whose name was made to resolve to the box (DNS rebinding) is turned
//! away: the browser sends that site's name.

use http::{Request, StatusCode, header};

/// Why a request's names for its server were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostRefusal {
    /// No `Host` field (HTTP/1.1 requires one; HTTP/1.0 could leave it out).
    #[error("the request has no Host header: it must name the server it is for")]
    Missing,
    /// More than one `Host` field: which one a proxy in front read cannot be known.
    #[error("the request has {0} Host headers: it must have exactly one")]
    Several(usize),
    /// A `Host` field that is not visible ASCII.
    #[error("the request's Host header is not text")]
    Unreadable,
    /// A name the server does not answer as (given lower-cased).
    #[error("this server does not answer as {0:?}")]
    Unknown(String),
}

impl HostRefusal {
    /// The status of the answer: 421 (Misdirected Request) for a name the server does not
    /// answer as, 400 for a request that does not say one clearly.
    pub fn status(&self) -> StatusCode {
        match self {
            HostRefusal::Unknown(_) => StatusCode::MISDIRECTED_REQUEST,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// Checks the names `request` gives its server: its one `Host` field, and the authority of
/// its target when it has one, each lower-cased and given to `allowed` (`host` or
/// `host:port`, an IPv6 address in brackets).
pub fn check<B>(request: &Request<B>, allowed: impl Fn(&str) -> bool) -> Result<(), HostRefusal> {
    let mut fields = request.headers().get_all(header::HOST).iter();
    let field = match (fields.next(), fields.count()) {
        (None, _) => return Err(HostRefusal::Missing),
        (Some(field), 0) => field,
        (Some(_), more) => return Err(HostRefusal::Several(more + 1)),
    };
    let host = field
        .to_str()
        .map_err(|_| HostRefusal::Unreadable)?
        .to_ascii_lowercase();
    if !allowed(&host) {
        return Err(HostRefusal::Unknown(host));
    }
    if let Some(authority) = request.uri().authority() {
        // Without any user part: only the host and the port name the server.
        let target = match authority.port_u16() {
            Some(port) => format!("{}:{port}", authority.host()),
            None => authority.host().to_string(),
        }
        .to_ascii_lowercase();
        if !allowed(&target) {
            return Err(HostRefusal::Unknown(target));
        }
    }
    Ok(())
}

/// `authority` split into its host and its port: `"[::1]:9464"` is `("[::1]", Some(9464))`,
/// `"box"` is `("box", None)`. `None` when the port is not a number or the host is empty.
pub fn split_port(authority: &str) -> Option<(&str, Option<u16>)> {
    // The last colon after any `]` separates the port; an IPv6 address is in brackets.
    let after_bracket = authority.rfind(']').map_or(0, |at| at + 1);
    let (host, port) = match authority[after_bracket..].rfind(':') {
        Some(at) => {
            let at = after_bracket + at;
            let port = authority[at + 1..].parse::<u16>().ok()?;
            (&authority[..at], Some(port))
        }
        None => (authority, None),
    };
    (!host.is_empty()).then_some((host, port))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn request(target: &str, hosts: &[&str]) -> Request<()> {
        let mut builder = Request::get(target);
        for host in hosts {
            builder = builder.header(header::HOST, *host);
        }
        builder.body(()).unwrap()
    }

    fn ours(host: &str) -> bool {
        host == "box:8740"
    }

    #[test]
    fn only_one_host_of_the_servers_own_names_passes() {
        assert_eq!(check(&request("/", &["Box:8740"]), ours), Ok(()));
        assert_eq!(
            check(&request("/", &["evil.example:8740"]), ours),
            Err(HostRefusal::Unknown("evil.example:8740".into()))
        );
        assert_eq!(check(&request("/", &[]), ours), Err(HostRefusal::Missing));
        assert_eq!(
            check(&request("/", &["box:8740", "evil.example"]), ours),
            Err(HostRefusal::Several(2))
        );
        assert_eq!(
            HostRefusal::Unknown("x".into()).status(),
            StatusCode::MISDIRECTED_REQUEST
        );
        assert_eq!(HostRefusal::Missing.status(), StatusCode::BAD_REQUEST);
    }

    #[test]
    fn an_absolute_target_must_name_the_server_too() {
        let absolute = request("http://user@box:8740/x", &["box:8740"]);
        assert_eq!(check(&absolute, ours), Ok(()));
        let elsewhere = request("http://evil.example/x", &["box:8740"]);
        assert_eq!(
            check(&elsewhere, ours),
            Err(HostRefusal::Unknown("evil.example".into()))
        );
    }

    #[test]
    fn an_authority_splits_at_the_port_after_any_ipv6_address() {
        assert_eq!(split_port("box:8740"), Some(("box", Some(8740))));
        assert_eq!(split_port("box"), Some(("box", None)));
        assert_eq!(split_port("[::1]:9464"), Some(("[::1]", Some(9464))));
        assert_eq!(split_port("[::1]"), Some(("[::1]", None)));
        assert_eq!(split_port("box:http"), None);
        assert_eq!(split_port("box:99999"), None);
        assert_eq!(split_port(":80"), None);
    }
}
