//! Who may use brokerd's socket: root, brokerd's own user, or a member of `socket_group`, as
//! the kernel reports the peer (`SO_PEERCRED`), and never one of brokerd's own descendants
//! (its MCP servers and what they start, which run as brokerd's user: see [`super::descent`]).

use super::{ServerOptions, descent};
use std::ffi::CString;
use tokio::net::UnixStream;

/// Whether a peer of user `uid` and group `gid`, whose user belongs to `groups`, may use a
/// brokerd running as `own_uid` that admits group `allowed_gid`.
pub fn peer_allowed(
    uid: u32,
    gid: u32,
    groups: &[u32],
    own_uid: u32,
    allowed_gid: Option<u32>,
) -> bool {
    uid == 0
        || uid == own_uid
        || allowed_gid.is_some_and(|allowed| gid == allowed || groups.contains(&allowed))
}

/// The groups of user `uid` (primary and supplementary), as the user database says; empty when
/// the user is unknown or the lookup fails.
fn user_groups(uid: u32) -> Vec<u32> {
    let user = match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => user,
        Ok(None) => return Vec::new(),
        Err(e) => {
            tracing::warn!(uid, "cannot look the peer's user up: {e}");
            return Vec::new();
        }
    };
    CString::new(user.name)
        .ok()
        .and_then(|name| nix::unistd::getgrouplist(&name, user.gid).ok())
        .map(|groups| groups.into_iter().map(|g| g.as_raw()).collect())
        .unwrap_or_else(|| vec![user.gid.as_raw()])
}

/// Checks the peer of `stream` against `options`: its user, then that it does not descend from
/// brokerd; the error says why it may not connect.
pub(super) async fn check_peer(stream: &UnixStream, options: &ServerOptions) -> Result<(), String> {
    let cred = stream
        .peer_cred()
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    check_user(cred.uid(), cred.gid(), options.own_uid, options.allowed_gid).await?;
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

/// Whether user `uid` of group `gid` may connect; the error says why not.
async fn check_user(
    uid: u32,
    gid: u32,
    own_uid: u32,
    allowed_gid: Option<u32>,
) -> Result<(), String> {
    if peer_allowed(uid, gid, &[], own_uid, allowed_gid) {
        return Ok(());
    }
    if allowed_gid.is_some() {
        let groups = tokio::task::spawn_blocking(move || user_groups(uid))
            .await
            .unwrap_or_default();
        if peer_allowed(uid, gid, &groups, own_uid, allowed_gid) {
            return Ok(());
        }
    }
    Err(match allowed_gid {
        Some(allowed) => {
            format!(
                "uid {uid} is not root, not brokerd's user ({own_uid}) and not in group {allowed}"
            )
        }
        None => format!(
            "uid {uid} is not root and not brokerd's user ({own_uid}); no socket_group is configured"
        ),
    })
}
