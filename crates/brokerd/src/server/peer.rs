//! Who may use brokerd's socket: root, brokerd's own user, or a member of `socket_group`, as
//! the kernel reports the peer ([`bxhttp::peer`]), and never one of brokerd's own descendants
//! (its MCP servers and what they start, which run as brokerd's user: see [`super::descent`]).

use super::{NAMES, ServerOptions, descent};
use tokio::net::UnixStream;

/// Checks the peer of `stream` against `options`: its user, then that it does not descend from
/// brokerd; the error says why it may not connect.
pub(super) async fn check_peer(stream: &UnixStream, options: &ServerOptions) -> Result<(), String> {
    let cred =
        bxhttp::peer::check_user(stream, &NAMES, options.own_uid, options.allowed_gid).await?;
    let brokerd = descent::Brokerd::this_process()
        .map_err(|e| format!("brokerd cannot read its own process: {e}"))?;
    let pid = cred.pid();
    if pid.is_some_and(|pid| brokerd.plainly_not_a_descendant(pid)) {
        return Ok(());
    }
    // Taken now, while the connection is fresh: it pins the process that connected.
    let pidfd = descent::peer_pidfd(stream)?;
    // /proc is memory: a short walk is cheaper here than a hop to the blocking pool.
    if let Some(verdict) =
        descent::check(pid, brokerd, pidfd.as_ref(), descent::INLINE_WALK_PROCESSES)
    {
        return verdict;
    }
    tokio::task::spawn_blocking(move || {
        let deep = descent::check(
            pid,
            brokerd,
            pidfd.as_ref(),
            descent::ANCESTRY_MAX_PROCESSES,
        );
        deep.unwrap_or_else(|| Err(String::from("the peer's ancestry could not be walked")))
    })
    .await
    .map_err(|e| format!("the peer check failed: {e}"))?
}
