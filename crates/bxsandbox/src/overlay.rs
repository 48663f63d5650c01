//! The overlay of a run (the shim's side): each `rw_paths` entry given a stage is mounted
//! through an overlay whose lower layer is the entry (bound by its pinned descriptor) and whose
//! upper layer is the stage's `upper` directory, so that every write of the run lands there and
//! the entry is left as it was. brokerd applies the upper directory after the run
//! (`docs/undo.md`, "Runs under rw_paths").
//!
//! Why the shim mounts it, not bubblewrap: bubblewrap's `--overlay` mounts by a path it
//! resolves again, which would undo the pinning of the entry (`pin`). The shim runs after
//! bubblewrap dropped its capabilities, so it makes a user and mount namespace of its own (its
//! uid mapped to 0 there: the kernel lets such a root mount an overlay), mounts each overlay
//! on the entry's place, hides the stages under a read-only tmpfs, and then enters a second
//! user namespace that maps its uid back to itself: there it is not root, so the program it
//! executes starts with no capability, and none over the mounts above.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Where the stages are bound inside the sandbox, one directory per overlay (`0`, `1`, ...);
/// hidden from the program once the overlays are mounted.
pub const STAGE_ROOT: &str = "/.bxoverlay";
/// Options that keep every change in the upper directory whole: no redirect of a renamed
/// directory to its lower path (the rename fails with `EXDEV`, and `mv` copies instead) and no
/// metadata-only copy of a file whose data stays below. The caller reads the upper directory
/// alone.
const WHOLE_FILES: &str = "redirect_dir=nofollow,metacopy=off";
/// The tmpfs laid over [`STAGE_ROOT`] once the overlays are mounted: read-only, and as small
/// as the kernel allows (it holds nothing).
const HIDING_TMPFS_OPTIONS: &str = "size=4k,mode=0555";
/// The directory of a stage that receives the run's writes.
pub const UPPER: &str = "upper";
/// The directory of a stage the overlay needs for its own work (empty between runs).
pub const WORK: &str = "work";

/// One overlay for the shim to mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverlayMount {
    /// The `rw_paths` entry, inside the sandbox (where it is bound).
    pub dest: PathBuf,
    /// Its stage, inside the sandbox (beneath [`STAGE_ROOT`]).
    pub stage: PathBuf,
}

/// Why the overlays could not be set up; the program did not run.
#[derive(Debug, thiserror::Error)]
pub enum OverlayError {
    /// A namespace could not be made.
    #[error("cannot make {what} for the overlays: {source}")]
    Unshare {
        /// Which namespaces.
        what: &'static str,
        /// Why.
        source: nix::Error,
    },
    /// A namespace's id map could not be written.
    #[error("cannot write {file} for the overlays: {source}")]
    IdMap {
        /// Which file of `/proc/self`.
        file: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// A path cannot be given to the overlay (its options are split at these characters).
    #[error("{0} holds ',', ':', '\\\\' or '=': it cannot be an overlay's layer")]
    Unsafe(PathBuf),
    /// The kernel refused a mount.
    #[error("cannot mount {what} on {path}: {source}")]
    Mount {
        /// The overlay, or the tmpfs over the stages.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        source: nix::Error,
    },
    /// The working directory could not be entered again through the overlay.
    #[error("cannot enter the working directory again through the overlay: {source}")]
    Cwd {
        /// Why.
        source: std::io::Error,
    },
    /// The sandbox runs as uid 0, whose namespace root would keep every capability.
    #[error("the sandbox runs as uid 0; an overlay needs an unprivileged user")]
    Root,
}

/// Mounts `overlays` as the module says, then leaves this process in a namespace where it has
/// no capability over them. Before any other wall: the rlimits, Landlock and the exec wall
/// come after, in the namespace the program runs in.
pub fn mount_all(overlays: &[OverlayMount]) -> Result<(), OverlayError> {
    use nix::mount::{MsFlags, mount};
    use nix::sched::CloneFlags;
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    if uid.is_root() {
        return Err(OverlayError::Root);
    }
    for overlay in overlays {
        for path in [&overlay.dest, &overlay.stage] {
            if !safe_for_options(path) {
                return Err(OverlayError::Unsafe(path.clone()));
            }
        }
    }
    enter(
        CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS,
        "a user and mount namespace",
    )?;
    map_ids(&format!("0 {uid} 1"), &format!("0 {gid} 1"))?;
    for overlay in overlays {
        let options = format!(
            "lowerdir={dest},upperdir={upper},workdir={work},userxattr,{WHOLE_FILES}",
            dest = overlay.dest.display(),
            upper = overlay.stage.join(UPPER).display(),
            work = overlay.stage.join(WORK).display(),
        );
        mount(
            Some("overlay"),
            &overlay.dest,
            Some("overlay"),
            MsFlags::empty(),
            Some(options.as_str()),
        )
        .map_err(|source| OverlayError::Mount {
            what: "an overlay",
            path: overlay.dest.clone(),
            source,
        })?;
    }
    // The working directory bubblewrap set is the entry beneath the overlay: entered again
    // by its path, it is the overlay's, or a relative write would reach the entry itself.
    let cwd = std::env::current_dir().map_err(|source| OverlayError::Cwd { source })?;
    std::env::set_current_dir(&cwd).map_err(|source| OverlayError::Cwd { source })?;
    let hidden = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    mount(
        Some("tmpfs"),
        STAGE_ROOT,
        Some("tmpfs"),
        hidden,
        Some(HIDING_TMPFS_OPTIONS),
    )
    .map_err(|source| OverlayError::Mount {
        what: "a tmpfs over the stages",
        path: PathBuf::from(STAGE_ROOT),
        source,
    })?;
    // Out of the namespace whose root mounted all this: here this process's uid is its own
    // again, not 0, so the program's exec leaves it no capability (`no_new_privs` is set).
    enter(CloneFlags::CLONE_NEWUSER, "a user namespace")?;
    map_ids(&format!("{uid} 0 1"), &format!("{gid} 0 1"))
}

fn enter(flags: nix::sched::CloneFlags, what: &'static str) -> Result<(), OverlayError> {
    nix::sched::unshare(flags).map_err(|source| OverlayError::Unshare { what, source })
}

/// Writes the new namespace's maps (`setgroups` denied first, as an unprivileged map needs).
fn map_ids(uid_map: &str, gid_map: &str) -> Result<(), OverlayError> {
    for (file, text) in [
        ("/proc/self/setgroups", "deny"),
        ("/proc/self/uid_map", uid_map),
        ("/proc/self/gid_map", gid_map),
    ] {
        std::fs::write(file, text).map_err(|source| OverlayError::IdMap { file, source })?;
    }
    Ok(())
}

/// Whether `path` can stand in an overlay's mount options as it is.
pub fn safe_for_options(path: &Path) -> bool {
    path.to_str()
        .is_some_and(|p| !p.contains([',', ':', '\\', '=']))
}
