//! `POST /v1/web/link` and `POST /v1/web/revoke`: how the owner, on the box, lets a browser
//! into the web console and ends every browser session (`docs/web.md`).

use super::ApiFailure;
use crate::signin::SignIns;
use proto::api::{WebLink, WebRevoked};

/// What a request for the console gets when `[web] listen` is unset.
pub const CONSOLE_OFF: &str = "the web console is off: set [web] listen in loopd.toml";

fn console(sign_ins: Option<&SignIns>) -> Result<&SignIns, ApiFailure> {
    sign_ins.ok_or_else(|| ApiFailure::BadRequest(CONSOLE_OFF.into()))
}

/// A new one-time sign-in link.
pub(super) fn link(sign_ins: Option<&SignIns>) -> Result<WebLink, ApiFailure> {
    let sign_ins = console(sign_ins)?;
    let made = sign_ins
        .mint_link()
        .map_err(|e| ApiFailure::Internal(format!("cannot make a sign-in link: {e}")))?;
    tracing::info!("web: a sign-in link was made");
    Ok(WebLink {
        url: sign_ins.link_url(&made.token),
        expires_in_ms: made.expires_in_ms,
    })
}

/// Every browser session and unused link ended.
pub(super) fn revoke(sign_ins: Option<&SignIns>) -> Result<WebRevoked, ApiFailure> {
    let (sessions, links) = console(sign_ins)?.revoke_all();
    tracing::info!(sessions, links, "web: every browser session was ended");
    Ok(WebRevoked { sessions, links })
}
