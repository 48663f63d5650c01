//! Whether the sandbox's user can walk to a path. When the caller is root, bubblewrap runs as
//! `nobody` (`probe::ROOT_FALLBACK_ID`), and it resolves every bind's source (`realpath`, also
//! for `--bind-fd`) as that user: a path beneath a directory `nobody` may not search (root's
//! 0700 home, where a checkout often lies) cannot be bound, and a program there cannot be
//! executed. Checked by mode bits, with the sandbox's user in its own group alone (it has no
//! supplementary groups); an ACL granting `nobody` more is not seen.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A directory above a path that the sandbox's user may not search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Blocked {
    /// The directory.
    pub(crate) dir: PathBuf,
    /// Its mode (permission bits).
    pub(crate) mode: u32,
}

impl Blocked {
    /// "…/x is mode 0700, which nobody (uid 65534) may not enter".
    pub(crate) fn describe(&self, uid: u32) -> String {
        format!(
            "{} is mode {:04o}, which the sandbox's user (uid {uid}) may not enter",
            self.dir.display(),
            self.mode
        )
    }
}

/// The first directory above `path` (from `/` down) that `uid` in group `gid` may not search;
/// `None` when every one may be searched, or one cannot be examined (bubblewrap then says).
pub(crate) fn blocked_above(path: &Path, uid: u32, gid: u32) -> Option<Blocked> {
    let mut dirs: Vec<&Path> = path.ancestors().skip(1).collect();
    dirs.reverse();
    dirs.into_iter().find_map(|dir| {
        let meta = std::fs::metadata(dir).ok()?;
        (!permits(&meta, uid, gid, SEARCH)).then(|| Blocked {
            dir: dir.to_owned(),
            mode: meta.mode() & 0o7777,
        })
    })
}

/// The execute (for a directory: search) permission bit, as the "other" class has it.
pub(crate) const SEARCH: u32 = 0o001;

/// Whether `uid` in group `gid` has permission `bit` (`SEARCH`, or 0o002 write, 0o004 read,
/// in the "other" position) on the file `meta` describes, by its mode bits.
pub(crate) fn permits(meta: &std::fs::Metadata, uid: u32, gid: u32, bit: u32) -> bool {
    let shift = if meta.uid() == uid {
        6
    } else if meta.gid() == gid {
        3
    } else {
        0
    };
    meta.mode() & (bit << shift) != 0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_closed_directory_above_a_path_is_named_with_its_mode() {
        let top = tempfile::tempdir().unwrap();
        let closed = top.path().join("home");
        let file = closed.join("src/file");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "x").unwrap();
        chmod(top.path(), 0o755);
        chmod(&closed, 0o700);
        // A user other than the owner, in another group: the "other" bits decide.
        let (uid, gid) = (65534, 65534);
        let me = std::fs::metadata(&closed).unwrap();
        if (me.uid(), me.gid()) == (uid, gid) {
            return; // The tests run as that very user: it owns everything here.
        }
        let blocked = blocked_above(&file, uid, gid).unwrap();
        assert_eq!(blocked.dir, closed);
        assert_eq!(blocked.mode, 0o700);
        chmod(&closed, 0o711);
        assert_eq!(blocked_above(&file, uid, gid), None);
        // The owner may always search its own 0700 directory.
        assert_eq!(blocked_above(&file, me.uid(), me.gid()), None);
    }
}
