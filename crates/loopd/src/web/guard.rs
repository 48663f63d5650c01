//! The checks a request passes before any page or action: the Host it names (a page of
//! another site that rebinds its name to loopback is turned away), the session cookie, and for
//! every state-changing request its origin and CSRF token. And the headers every answer
//! carries.

use super::{COOKIE_NAME, Console};
use crate::signin::{NewSession, tokens_match};
use bxhttp::host::HostRefusal;
use http::{HeaderMap, HeaderValue, Request, header};

/// The Content-Security-Policy of every answer: nothing inline, nothing from elsewhere.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

/// The header a script sends its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// Whether the request is for the console: its one `Host` (and the authority of a target in
/// absolute form) is the listen address or the origin's `host[:port]`. A missing `Host`, or
/// two, are refused too; `Err` says what was wrong.
pub fn host_check<B>(request: &Request<B>, console: &Console) -> Result<(), HostRefusal> {
    let listen = console.listen.to_string();
    bxhttp::host::check(request, |host| {
        host == listen || host == console.origin.authority
    })
}

/// The session token of the request's cookie, when it has one.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE_NAME)
        .map(|(_, value)| value.to_string())
}

/// Why a state-changing request is refused as coming from another site, if it is: an
/// `Origin` that is not the console's, or a `Sec-Fetch-Site` that is not `same-origin` (or
/// `none`, a request the person made themselves).
pub fn cross_site(headers: &HeaderMap, console: &Console) -> Option<String> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or("").to_ascii_lowercase();
        if origin != console.origin.as_url() {
            return Some(format!(
                "a request from {origin:?} may not change anything here: only pages of {} may",
                console.origin.as_url()
            ));
        }
    }
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("same-origin");
    match site {
        "same-origin" | "none" => None,
        other => Some(format!(
            "a {other} request may not change anything here (Sec-Fetch-Site: {other})"
        )),
    }
}

/// Whether `given` is the session's CSRF token.
pub fn csrf_ok(given: Option<&str>, expected: &str) -> bool {
    given.is_some_and(|given| tokens_match(given, expected))
}

/// The `Set-Cookie` of a new browser session: `HttpOnly`, `SameSite=Strict`, for the whole
/// console, ending with the session; `Secure` when the console's origin is https.
pub fn set_cookie(session: &NewSession, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{COOKIE_NAME}={}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{secure}",
        session.token, session.max_age_s
    )
}

/// The `Set-Cookie` that removes the session cookie (signing out).
pub fn clear_cookie() -> String {
    format!("{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0")
}

/// Adds the headers every answer carries: the CSP, no framing, no sniffing, a referrer only
/// to the console itself (nothing of its URLs reaches another site; `no-referrer` would make
/// the browser send `Origin: null` on the console's own form posts, which are then refused),
/// and no caching of anything but the assets.
pub fn secure_headers(headers: &mut HeaderMap, cacheable: bool) {
    let set = |headers: &mut HeaderMap, name: &'static str, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, "content-security-policy", CONTENT_SECURITY_POLICY);
    set(headers, "x-frame-options", "DENY");
    set(headers, "x-content-type-options", "nosniff");
    set(headers, "referrer-policy", "same-origin");
    set(headers, "cross-origin-opener-policy", "same-origin");
    set(headers, "cross-origin-resource-policy", "same-origin");
    if cacheable {
        set(headers, "cache-control", "private, max-age=300");
    } else {
        set(headers, "cache-control", "no-store");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::Web;

    fn console(origin: Option<&str>) -> Console {
        Console::from_config(&Web {
            listen: Some("127.0.0.1:8740".parse().unwrap()),
            origin: origin.map(String::from),
            ..Web::default()
        })
        .unwrap()
    }

    fn host(hosts: &[&str]) -> Result<(), HostRefusal> {
        let mut request = Request::get("/");
        for host in hosts {
            request = request.header(header::HOST, *host);
        }
        host_check(
            &request.body(()).unwrap(),
            &console(Some("https://box.example.com")),
        )
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn only_the_consoles_own_host_names_are_served() {
        assert_eq!(host(&["127.0.0.1:8740"]), Ok(()));
        assert_eq!(host(&["Box.Example.com"]), Ok(()));
        assert!(host(&["evil.example:8740"]).is_err());
        assert!(host(&["localhost:8740"]).is_err());
        assert_eq!(host(&[]), Err(HostRefusal::Missing));
        assert_eq!(
            host(&["box.example.com", "evil.example"]),
            Err(HostRefusal::Several(2))
        );
    }

    #[test]
    fn a_request_from_another_origin_or_site_is_named_and_refused() {
        let c = console(None);
        assert_eq!(cross_site(&HeaderMap::new(), &c), None);
        let same = headers(&[
            ("origin", "http://127.0.0.1:8740"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert_eq!(cross_site(&same, &c), None);
        let other = cross_site(&headers(&[("origin", "http://evil.example")]), &c).unwrap();
        assert!(other.contains("evil.example"), "{other}");
        let site = cross_site(&headers(&[("sec-fetch-site", "cross-site")]), &c).unwrap();
        assert!(site.contains("cross-site"), "{site}");
        let null = headers(&[("origin", "null")]);
        assert!(cross_site(&null, &c).is_some());
    }

    #[test]
    fn the_session_cookie_is_found_among_others_and_made_strict() {
        let h = headers(&[("cookie", "a=1; bx_session=abc; b=2")]);
        assert_eq!(session_cookie(&h).as_deref(), Some("abc"));
        assert_eq!(
            session_cookie(&headers(&[("cookie", "bx_sessionx=1")])),
            None
        );
        let made = set_cookie(
            &NewSession {
                token: "t".into(),
                max_age_s: 60,
            },
            true,
        );
        assert_eq!(
            made,
            "bx_session=t; HttpOnly; SameSite=Strict; Path=/; Max-Age=60; Secure"
        );
        assert!(csrf_ok(Some("x"), "x"));
        assert!(!csrf_ok(None, "x"));
        assert!(!csrf_ok(Some("y"), "x"));
    }
}
