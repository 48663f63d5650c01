//! The web console (issue 21, `docs/web.md`): the owner's view of the box from a browser,
//! served by loopd on `[web] listen` (loopback by default), over the same [`Backend`] the
//! Unix-socket API serves from.
//!
//! Nothing answers without a browser session (a cookie made from a one-time link that `boxctl
//! web` asks for, [`crate::signin`]); every state-changing request carries the session's CSRF
//! token and comes from the console's own origin (`guard`). Pages are HTML made on the server
//! with `maud`, which escapes every piece of session text; the one script (`assets`) only
//! ever sets `textContent`, and the Content-Security-Policy allows no inline script.
//!
//! - `server`: the TCP listener on bxhttp's accept loop (a connection cap that closes the
//!   oldest idle or half-open connection to make room, the header-read and idle timeouts),
//!   until shutdown.
//! - `routes`: which path and method does what; the security headers on every answer.
//! - `guard`: the Host, cookie, Origin and CSRF checks.
//! - `form`: request bodies (forms and JSON) within `[web] max_body_bytes`.
//! - `pages`: the HTML of each page; `assets`: the script and the style sheet.

mod assets;
mod form;
mod guard;
mod pages;
mod routes;
mod server;
mod undo;

use crate::config::{Origin, Web};
use crate::signin::{SignInLimits, SignIns};
use std::net::SocketAddr;
use std::sync::Arc;

pub use server::{
    MAX_WEB_CONNECTIONS, WEB_HEADER_READ_TIMEOUT_MS, WEB_IDLE_TIMEOUT_MS, WEB_RETRY_AFTER_S,
    WEB_SHUTDOWN_DRAIN_MS, bind, serve,
};

/// The most records one transcript page shows; later ones are a link away.
pub const TRANSCRIPT_PAGE_RECORDS: u64 = 500;
/// The name of the session cookie.
pub const COOKIE_NAME: &str = "bx_session";

/// What the console needs besides the backend: who is signed in, and its address.
#[derive(Debug)]
pub struct Console {
    /// The sign-ins, shared with the API's `POST /v1/web/link` and `/v1/web/revoke`.
    pub sign_ins: Arc<SignIns>,
    /// The address it listens on.
    pub listen: SocketAddr,
    /// Its address as a browser sees it.
    pub origin: Origin,
    /// How often an idle event stream gets a ping, in milliseconds.
    pub sse_ping_interval_ms: u64,
    /// The largest request body it reads, in bytes (`[web] max_body_bytes`).
    pub max_body_bytes: usize,
}

impl Console {
    /// The console of `[web]`, or `None` when `listen` is unset (or the origin unreadable,
    /// which the config check refuses first).
    pub fn from_config(web: &Web) -> Option<Console> {
        let listen = web.listen?;
        let origin = web.resolved_origin()?;
        Some(Console {
            sign_ins: Arc::new(SignIns::new(
                SignInLimits {
                    link_ttl_ms: web.link_ttl_ms,
                    session_ttl_ms: web.session_ttl_ms,
                    max_sessions: web.max_sessions,
                },
                origin.as_url(),
            )),
            listen,
            origin,
            sse_ping_interval_ms: crate::api::SSE_PING_INTERVAL_MS,
            max_body_bytes: web.max_body_bytes,
        })
    }
}
