//! Who may do what only the owner may (answer an approval, get a web console link, end the
//! browser sessions): not brokerd's descendants. brokerd's MCP servers run as brokerd's user,
//! which is loopd's user too, so loopd's socket lets them in; were they able to answer
//! approvals, a server (or anything it started) could approve the calls it was meant to wait
//! on. So the peer is walked up `/proc` (`bxhttp::ancestry`, the walk brokerd uses on its own
//! socket), and refused when brokerd is among its parents.
//!
//! Which process brokerd is, loopd learns from its own connections to brokerd
//! (`bxhttp::pool::Pool::servers`): each new one notes the process that answered it
//! (`SO_PEERCRED`), held by its pidfd for as long as it runs. Never from whatever brokerd's
//! socket path leads to when the owner answers: an MCP server can move that file aside or put
//! a socket of its own there. Such a process only joins the list (it does not replace brokerd
//! while brokerd runs); a brokerd that exited leaves it, so a restarted one is the one checked.
//! When no listed process runs, loopd connects again through the same pool; if it cannot, or
//! the list cannot be trusted, nobody is let through (503): without brokerd, the owner cannot
//! be told from an MCP server. Ending the browser sessions is the exception: it gives nothing
//! away, so it goes through then (a known descendant is still refused).
//!
//! The peer is the process that connected (`SO_PEERCRED`'s pid), held by the pidfd the server
//! took at accept (`bxhttp::peer::PeerUser::process`). After the walk, that pidfd must still
//! hold the pid, so a pid that a descendant left and another process took is never walked in
//! its place; and each brokerd must still run. What cannot be decided is refused: a peer whose
//! pid the kernel did not give (another pid namespace), a walk that fails.
//!
//! Without `[broker] socket` (loopd's fake tools) loopd calls no brokerd, so no MCP server
//! runs and nothing waits on the owner because of one: nothing is refused.

use super::ApiFailure;
use bxhttp::ancestry::{Ancestor, Procfs};
use bxhttp::peer::PeerUser;
use bxhttp::pidfd::Pinned;
use bxhttp::pool::Pool;
use std::sync::Arc;
use std::time::Duration;

/// How long finding brokerd may take when loopd must connect to it again, in milliseconds.
pub const REACH_BROKERD_TIMEOUT_MS: u64 = 2_000;

/// What the peer asks to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OwnerAct {
    /// Answer an approval (`POST /v1/approvals/{id}`).
    Answer,
    /// Get a one-time sign-in link for the web console (`POST /v1/web/link`).
    Link,
    /// End every browser session (`POST /v1/web/revoke`).
    Revoke,
    /// Undo a session's last turns (`POST /v1/sessions/{id}/undo`): it rewrites files.
    Undo,
}

impl OwnerAct {
    /// What it is, after "may not".
    fn words(self) -> &'static str {
        match self {
            OwnerAct::Answer => "answer approvals",
            OwnerAct::Link => "get a web console link",
            OwnerAct::Revoke => "end the browser sessions",
            OwnerAct::Undo => "undo turns",
        }
    }

    /// What to do again, once brokerd answers.
    fn retry(self) -> &'static str {
        match self {
            OwnerAct::Answer => "answer again",
            OwnerAct::Link | OwnerAct::Revoke | OwnerAct::Undo => "ask again",
        }
    }
}

/// Refuses `peer` `act` when it descends from brokerd, as loopd's connections to brokerd
/// (`broker`) know it; 503 when brokerd cannot be found. Without a broker (fake tools) there
/// are no MCP servers to refuse.
pub(super) async fn not_brokers_descendant(
    broker: Option<&Pool>,
    peer: Option<&PeerUser>,
    act: OwnerAct,
) -> Result<(), ApiFailure> {
    let Some(broker) = broker else {
        return Ok(());
    };
    let reach = Duration::from_millis(REACH_BROKERD_TIMEOUT_MS);
    let servers = match tokio::time::timeout(reach, broker.reach_servers()).await {
        Ok(Ok(servers)) => servers,
        Ok(Err(why)) => return cannot_tell(act, &format!("brokerd is not reachable ({why})")),
        Err(_) => {
            return cannot_tell(
                act,
                &format!(
                    "brokerd is not reachable (no connection within {REACH_BROKERD_TIMEOUT_MS} ms)"
                ),
            );
        }
    };
    let Some(peer) = peer.cloned() else {
        return Err(no_pid());
    };
    // /proc is read up to ANCESTRY_MAX_PROCESSES times: off the async threads.
    tokio::task::spawn_blocking(move || verdict(&servers, &peer, act))
        .await
        .unwrap_or_else(|e| Err(ApiFailure::Internal(format!("the peer check failed: {e}"))))
}

/// The verdict for `peer` against brokerd's running processes `servers`.
fn verdict(servers: &[Arc<Pinned>], peer: &PeerUser, act: OwnerAct) -> Result<(), ApiFailure> {
    let Some(pid) = peer
        .pid
        .and_then(|pid| u32::try_from(pid).ok())
        .filter(|pid| *pid > 0)
    else {
        return Err(no_pid());
    };
    let mut brokerds: Vec<Ancestor> = Vec::with_capacity(servers.len());
    for server in servers {
        match server.ancestor() {
            Ok(ancestor) => brokerds.push(ancestor),
            Err(e) => return brokerd_changed(act, server, &e),
        }
    }
    for brokerd in &brokerds {
        match brokerd.is_ancestor_of(pid, &Procfs) {
            Ok(false) => {}
            Ok(true) => {
                return Err(ApiFailure::Forbidden(format!(
                    "process {pid} descends from brokerd (process {}: an MCP server, or \
                     something one started): it may not {}",
                    brokerd.pid,
                    act.words()
                )));
            }
            Err(e) => {
                return Err(ApiFailure::Forbidden(format!(
                    "cannot tell whether process {pid} descends from brokerd ({e}); refused"
                )));
            }
        }
    }
    // Only now, after the walk: if the process that connected still holds `pid`, the walk
    // read that process, not a later one given the same number.
    if let Err(e) = peer.process.still_holds(pid) {
        return Err(ApiFailure::Forbidden(format!(
            "the process that connected as pid {pid} cannot be told from the one there now \
             ({e}); refused"
        )));
    }
    for server in servers {
        if let Err(e) = server.alive() {
            return brokerd_changed(act, server, &e);
        }
    }
    Ok(())
}

/// The refusal of a peer whose pid the kernel did not give.
fn no_pid() -> ApiFailure {
    ApiFailure::Forbidden(
        "the kernel gave no pid for this peer (another pid namespace?), so loopd cannot tell it \
         from one of brokerd's MCP servers; do this from the box itself"
            .into(),
    )
}

/// The answer when brokerd cannot be found (`why`): 503, except for ending the browser
/// sessions, which goes through.
fn cannot_tell(act: OwnerAct, why: &str) -> Result<(), ApiFailure> {
    if act == OwnerAct::Revoke {
        tracing::warn!(
            "ending the browser sessions without telling whether the caller descends from brokerd: {why}"
        );
        return Ok(());
    }
    Err(ApiFailure::Unavailable(format!(
        "cannot tell whether the caller descends from brokerd: {why}; {} when it is",
        act.retry()
    )))
}

/// The answer when brokerd process `server` exited (or changed) during the check.
fn brokerd_changed(
    act: OwnerAct,
    server: &Pinned,
    e: &bxhttp::pidfd::PidfdError,
) -> Result<(), ApiFailure> {
    let why = format!("brokerd (process {}) is not reachable: {e}", server.pid());
    cannot_tell(act, &why)
}

#[cfg(test)]
mod tests;
