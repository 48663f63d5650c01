//! `boxctl web`: a one-time sign-in link for the web console, or `--revoke` to sign every
//! browser out (`docs/web.md`).

use super::{Failure, out_line};
use crate::cli::EXIT_OK;
use crate::client::Client;
use crate::format::duration_words;

/// Prints the link alone on stdout (so `$(boxctl web)` is the link) and how long it is good
/// for on stderr; with `revoke`, what was ended.
pub(super) async fn web(client: &Client, json: bool, revoke: bool) -> Result<u8, Failure> {
    if revoke {
        let answer = client.web_revoke().await?;
        if json {
            out_line(&answer.raw)?;
        } else {
            let r = answer.value;
            out_line(&format!(
                "signed out {} browser session(s); {} unused link(s) void",
                r.sessions, r.links
            ))?;
        }
        return Ok(EXIT_OK);
    }
    let answer = client.web_link().await?;
    if json {
        out_line(&answer.raw)?;
    } else {
        out_line(&answer.value.url)?;
        eprintln!(
            "boxctl: open it in a browser within {}; it signs in once (boxctl web --revoke signs every browser out)",
            duration_words(answer.value.expires_in_ms / 1000)
        );
    }
    Ok(EXIT_OK)
}
