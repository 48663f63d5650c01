//! The headers a grant attaches (`headers`, whose values may hold `{secret:NAME}`): filled
//! from the secrets brokerd holds when the call runs, sent to the first hop's origin only.
//!
//! - **Origin**: the first hop's scheme, host and port. The headers go on the first hop and
//!   on redirects that stay at that origin; once a redirect leaves it they are dropped for the
//!   rest of the call (a later redirect back does not bring them back: that URL was chosen by
//!   a server that was not meant to hold them). Browsers and curl drop `Authorization` across
//!   origins the same way.
//! - **Plain http**: a grant whose headers hold a secret fetches `https://` URLs only unless
//!   it says `allow_http_secrets = true` ([`check_scheme`]). A redirect from https to http
//!   changes the origin, so it gets no headers either way.
//! - **Never shown**: the filled values are marked sensitive and no error quotes them; a
//!   secret brokerd does not hold fails the call naming the secret.

use super::target::{Scheme, Target};
use crate::config::HttpGrant;
use crate::secrets::{Secrets, Template};
use crate::tool::ToolError;
use http::{HeaderName, HeaderValue};

/// Refuses a first hop over plain `http://` when the grant's headers hold a secret and the
/// grant does not allow that.
pub(crate) fn check_scheme(grant: &HttpGrant, first: &Target) -> Result<(), ToolError> {
    if first.scheme == Scheme::Http && grant.injects_secret() && !grant.allow_http_secrets {
        return Err(ToolError::InvalidArguments(
            "this session's grant attaches a secret to its requests, which goes over https \
             only, so it cannot fetch an http:// URL: use https:// (the grant's \
             allow_http_secrets = true would allow http://)"
                .to_string(),
        ));
    }
    Ok(())
}

/// The grant's headers, filled, and whether the call is still at their origin.
#[derive(Debug)]
pub(crate) struct Injected {
    /// The first hop's scheme, host and port.
    origin: (Scheme, String, u16),
    /// The headers, values filled and marked sensitive.
    headers: Vec<(HeaderName, HeaderValue)>,
    /// Whether a hop has left the origin (from then on nothing is attached).
    left: bool,
}

impl Injected {
    /// Fills `grant`'s headers from `secrets` for a call whose first hop is `first`.
    pub(crate) fn render(
        grant: &HttpGrant,
        secrets: &Secrets,
        first: &Target,
    ) -> Result<Injected, ToolError> {
        let mut headers = Vec::with_capacity(grant.headers.len());
        for (name, text) in &grant.headers {
            // The config refuses all of these but a missing secret; a grant made in code may
            // hold the rest.
            let broken = |why: &str| {
                ToolError::Failed(format!("the grant's header {name:?} cannot be sent: {why}"))
            };
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| broken("it is not a valid header name"))?;
            let template = Template::parse(text).map_err(|e| broken(&e.to_string()))?;
            let filled = template.render(secrets).map_err(|missing| {
                broken(&format!(
                    "it needs the secret {:?}, which brokerd does not hold (is it in \
                     [[secrets]], and was its file readable?)",
                    missing.0
                ))
            })?;
            let mut value = HeaderValue::from_str(&filled).map_err(|_| {
                broken("its value is not valid in HTTP once filled in (a control character?)")
            })?;
            value.set_sensitive(true);
            headers.push((header, value));
        }
        Ok(Injected {
            origin: origin(first),
            headers,
            left: false,
        })
    }

    /// The headers to attach to the hop to `target`: all of them while every hop so far is at
    /// the first hop's origin, none from the first hop that is not.
    pub(crate) fn for_hop(&mut self, target: &Target) -> &[(HeaderName, HeaderValue)] {
        self.left |= origin(target) != self.origin;
        if self.left { &[] } else { &self.headers }
    }
}

/// The origin of `target`: scheme, host (lower case) and port.
fn origin(target: &Target) -> (Scheme, String, u16) {
    (target.scheme, target.host.clone(), target.port)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::collections::BTreeMap;

    fn grant(headers: &[(&str, &str)], allow_http_secrets: bool) -> HttpGrant {
        HttpGrant {
            methods: vec!["GET".into()],
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            allow_http_secrets,
        }
    }

    fn target(url: &str) -> Target {
        Target::parse(url).unwrap()
    }

    #[test]
    fn headers_stay_at_the_first_origin_and_do_not_come_back() {
        let secrets = Secrets::from_values([("tok", "s3cr3t-value")]);
        let g = grant(&[("Authorization", "Bearer {secret:tok}")], false);
        let mut injected = Injected::render(&g, &secrets, &target("https://a.test/x")).unwrap();
        let first = injected.for_hop(&target("https://A.test:443/y"));
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].1.to_str().unwrap(), "Bearer s3cr3t-value");
        assert!(first[0].1.is_sensitive());
        assert!(injected.for_hop(&target("https://a.test:8443/")).is_empty());
        assert!(injected.for_hop(&target("https://a.test/")).is_empty());
        let mut injected = Injected::render(&g, &secrets, &target("https://a.test/")).unwrap();
        assert!(injected.for_hop(&target("http://a.test/")).is_empty());
        let mut injected = Injected::render(&g, &secrets, &target("https://a.test/")).unwrap();
        assert!(injected.for_hop(&target("https://b.test/")).is_empty());
    }

    #[test]
    fn a_missing_secret_fails_naming_it_and_http_needs_the_grant_to_say_so() {
        let g = grant(&[("Authorization", "Bearer {secret:gone}")], false);
        let e = Injected::render(&g, &Secrets::default(), &target("https://a.test/")).unwrap_err();
        assert!(
            matches!(&e, ToolError::Failed(m) if m.contains("\"gone\"") && m.contains("Authorization")),
            "{e:?}"
        );
        let http = target("http://a.test/");
        let e = check_scheme(&g, &http).unwrap_err();
        assert!(
            matches!(&e, ToolError::InvalidArguments(m) if m.contains("allow_http_secrets")),
            "{e:?}"
        );
        assert_eq!(check_scheme(&g, &target("https://a.test/")), Ok(()));
        let allowed = grant(&[("Authorization", "Bearer {secret:gone}")], true);
        assert_eq!(check_scheme(&allowed, &http), Ok(()));
        let plain = grant(&[("Accept", "application/json")], false);
        assert_eq!(check_scheme(&plain, &http), Ok(()));
    }
}
