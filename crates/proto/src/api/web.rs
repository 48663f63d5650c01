//! The bodies of loopd's web-console routes on its Unix socket (`POST /v1/web/link`, `POST
//! /v1/web/revoke`): how the owner, in a shell on the box, lets a browser in and ends every
//! browser session. The console itself is served on `[web] listen` (`docs/web.md`).

use serde::{Deserialize, Serialize};

/// A one-time sign-in link for the web console (`POST /v1/web/link`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebLink {
    /// `<origin>/signin?token=<64 hex digits>`: opening it signs a browser in, once.
    pub url: String,
    /// How long the link stays good, in milliseconds, from now.
    pub expires_in_ms: u64,
}

/// What `POST /v1/web/revoke` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebRevoked {
    /// Browser sessions signed out.
    pub sessions: u64,
    /// Sign-in links that had not been used, now void.
    pub links: u64,
}
