//! Who may connect, by user: root, the daemon's own user, or a member of its configured group,
//! as the kernel reports the peer (`SO_PEERCRED`). A daemon may check more on top (brokerd
//! refuses its own descendants).

use crate::Names;
use crate::pidfd::PeerPidfd;
use std::ffi::CString;
use tokio::net::UnixStream;
use tokio::net::unix::UCred;

/// Whether a peer of user `uid` and group `gid`, whose user belongs to `groups`, may use a
/// daemon running as `own_uid` that admits group `allowed_gid`.
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

/// The groups user `uid` belongs to, as the user database says (primary and supplementary).
/// Empty when the user is unknown or the lookup fails (logged). When `getgrouplist` fails, the
/// primary group and, if the user is on its member list, `allowed_gid`: the one group that
/// matters here is still found.
pub fn user_groups(uid: u32, allowed_gid: u32) -> Vec<u32> {
    let user = match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => user,
        Ok(None) => return Vec::new(),
        Err(e) => {
            tracing::warn!(uid, "cannot look the peer's user up: {e}");
            return Vec::new();
        }
    };
    let listed = CString::new(user.name.clone())
        .ok()
        .and_then(|name| nix::unistd::getgrouplist(&name, user.gid).ok());
    if let Some(groups) = listed {
        return groups.into_iter().map(|g| g.as_raw()).collect();
    }
    let mut groups = vec![user.gid.as_raw()];
    let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(allowed_gid));
    if let Ok(Some(group)) = group
        && group.mem.contains(&user.name)
    {
        groups.push(allowed_gid);
    }
    groups
}

/// Who sent a request, as the kernel said when the connection was accepted (`SO_PEERCRED`):
/// the server puts it into every request's extensions after the peer check passed, so a
/// handler can record who answered (loopd's approvals keep the deciding uid) and check the
/// process that connected (loopd refuses brokerd's descendants some routes).
#[derive(Debug, Clone)]
pub struct PeerUser {
    /// The peer process's user id.
    pub uid: u32,
    /// Its pid, when the kernel gave one in this process's pid namespace.
    pub pid: Option<i32>,
    /// That process, held by its pidfd from accept on: after reading `/proc/<pid>`, a check
    /// proves with it that the pid was not reused meanwhile.
    pub process: PeerPidfd,
}

impl PeerUser {
    /// The peer of `stream`, pinned now; `None` when the kernel does not say who it is.
    pub fn of(stream: &UnixStream) -> Option<PeerUser> {
        let cred = stream.peer_cred().ok()?;
        let pid = cred.pid().filter(|pid| *pid > 0);
        Some(PeerUser {
            uid: cred.uid(),
            pid,
            process: PeerPidfd::take(stream, pid),
        })
    }
}

/// Checks the user of `stream`'s peer: root, `own_uid`, or a member of `allowed_gid` (the
/// user database is read on the blocking pool, and only when the ids alone do not decide).
/// The peer's credentials when it may connect, for the daemon's further checks; otherwise why
/// not, naming the daemon and its group key.
pub async fn check_user(
    stream: &UnixStream,
    names: &Names,
    own_uid: u32,
    allowed_gid: Option<u32>,
) -> Result<UCred, String> {
    let cred = stream
        .peer_cred()
        .map_err(|e| format!("cannot read the peer's credentials: {e}"))?;
    let (uid, gid) = (cred.uid(), cred.gid());
    if peer_allowed(uid, gid, &[], own_uid, allowed_gid) {
        return Ok(cred);
    }
    if let Some(allowed) = allowed_gid {
        let groups = tokio::task::spawn_blocking(move || user_groups(uid, allowed))
            .await
            .unwrap_or_default();
        if peer_allowed(uid, gid, &groups, own_uid, allowed_gid) {
            return Ok(cred);
        }
    }
    let daemon = names.daemon;
    Err(match allowed_gid {
        Some(allowed) => {
            format!(
                "uid {uid} is not root, not {daemon}'s user ({own_uid}) and not in group {allowed}"
            )
        }
        None => format!(
            "uid {uid} is not root and not {daemon}'s user ({own_uid}); no {} is configured",
            names.group_key
        ),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const OWN: u32 = 990;
    const GROUP: u32 = 980;

    #[test]
    fn root_and_our_own_user_are_always_allowed() {
        assert!(peer_allowed(0, 0, &[], OWN, None));
        assert!(peer_allowed(OWN, 12345, &[], OWN, None));
        assert!(peer_allowed(0, 0, &[], OWN, Some(GROUP)));
    }

    #[test]
    fn others_need_the_configured_group() {
        assert!(!peer_allowed(1000, 1000, &[1000, GROUP], OWN, None));
        assert!(!peer_allowed(1000, 1000, &[1000, 27], OWN, Some(GROUP)));
    }

    #[test]
    fn group_membership_counts_by_primary_or_supplementary_group() {
        assert!(peer_allowed(1000, GROUP, &[], OWN, Some(GROUP)));
        assert!(peer_allowed(1000, 1000, &[1000, GROUP], OWN, Some(GROUP)));
    }

    #[test]
    fn root_is_in_the_root_group_by_the_user_database() {
        assert!(user_groups(0, 0).contains(&0));
    }

    #[test]
    fn an_unknown_user_belongs_to_no_group() {
        assert!(user_groups(4_000_000_000, GROUP).is_empty());
    }

    #[tokio::test]
    async fn our_own_user_passes_and_the_refusal_names_the_daemon_and_its_key() {
        let (ours, _theirs) = UnixStream::pair().unwrap();
        let names = crate::names::TEST_NAMES;
        let me = nix::unistd::getuid().as_raw();
        let cred = check_user(&ours, &names, me, None).await.unwrap();
        assert_eq!(cred.uid(), me);
        if me != 0 {
            let why = check_user(&ours, &names, me + 1, None).await.unwrap_err();
            assert!(why.contains("not testd's user"), "{why}");
            assert!(why.contains("no test.socket_group is configured"), "{why}");
        }
    }
}
