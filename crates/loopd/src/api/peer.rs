//! Who may use the API: root, loopd's own user, or a member of the configured group, as the
//! kernel reports the peer (`SO_PEERCRED`).

use super::ApiOptions;
use std::ffi::CString;
use tokio::net::UnixStream;

/// Whether a peer of user `uid` and group `gid`, whose user belongs to `groups`, may use the
/// API of a loopd running as `own_uid` that admits group `allowed_gid`.
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
/// Empty when the user is unknown or the lookup fails (logged).
fn user_groups(uid: u32, allowed_gid: u32) -> Vec<u32> {
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
    // getgrouplist failed: fall back to the primary group and the group's member list.
    let mut groups = vec![user.gid.as_raw()];
    let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(allowed_gid));
    if let Ok(Some(group)) = group
        && group.mem.contains(&user.name)
    {
        groups.push(allowed_gid);
    }
    groups
}

/// A peer that may not use the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused {
    /// Why (naming the peer's uid when the kernel said it), for the log and the 403.
    pub why: String,
}

/// Checks the peer of `stream` against `options`.
pub(super) async fn check_peer(stream: &UnixStream, options: &ApiOptions) -> Result<(), Refused> {
    let cred = stream.peer_cred().map_err(|e| Refused {
        why: format!("cannot read the peer's credentials: {e}"),
    })?;
    let (uid, gid) = (cred.uid(), cred.gid());
    if peer_allowed(uid, gid, &[], options.own_uid, options.allowed_gid) {
        return Ok(());
    }
    let groups = match options.allowed_gid {
        Some(allowed) => tokio::task::spawn_blocking(move || user_groups(uid, allowed))
            .await
            .unwrap_or_default(),
        None => Vec::new(),
    };
    if peer_allowed(uid, gid, &groups, options.own_uid, options.allowed_gid) {
        return Ok(());
    }
    let why = match options.allowed_gid {
        Some(allowed) => format!(
            "uid {uid} is not root, not loopd's user ({}) and not in group {allowed}",
            options.own_uid
        ),
        None => format!(
            "uid {uid} is not root and not loopd's user ({}); no api.socket_group is configured",
            options.own_uid
        ),
    };
    Err(Refused { why })
}

#[cfg(test)]
mod tests {
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
}
