//! The shim copied where the sandbox's user can reach it (issue 33.9). As root, bubblewrap
//! runs as `nobody`, which must walk to the shim to bind it and, with network, to execute it
//! as the helper (`reach`). A shim built beneath a directory `nobody` may not enter (a checkout
//! in root's 0700 home) is copied into [`SHIM_RUNTIME_DIR`], a directory of root's (0755) that
//! no one else may write, and the walls use the copy.
//!
//! Each copy is named after the original's device, inode, modification time and size: an
//! unchanged shim is copied once and shared by every process, a rebuilt one gets a copy of its
//! own. Walls hold their copy open with a shared lock (`flock`); each copy a probe makes or
//! takes removes the other copies no one holds, so rebuilds do not pile up (the directory is
//! a tmpfs: memory). A copy removed between its choice and its lock is made again.

use std::fs::{DirBuilder, File, TryLockError};
use std::io::ErrorKind;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the copies live: root's runtime directory, cleared at boot.
pub const SHIM_RUNTIME_DIR: &str = "/run/bxsandbox";
/// The mode of that directory and of each copy: everyone may read and execute, only root
/// may write.
const COPY_MODE: u32 = 0o755;
/// How each copy's name starts.
const COPY_PREFIX: &str = "bxsandbox-shim-";
/// How a copy being written is named, before the pid of the process writing it and a count.
const PARTIAL_PREFIX: &str = ".partial-";
/// How many times a copy that was removed before it could be held is made again.
const MAX_ATTEMPTS: usize = 3;

/// A copy of the shim in use, held open with a shared lock for as long as walls use it.
#[derive(Debug)]
pub(crate) struct ShimCopy {
    path: PathBuf,
    _held: File,
}

impl ShimCopy {
    /// Where the copy is.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// A copy of `shim` (a resolved path) in `dir` (created 0755 when missing; it must be this
/// user's and writable by no one else), held; the copies in `dir` no one holds are removed.
/// The error says why, for a sentence that names the shim.
pub(crate) fn copy_into(dir: &Path, shim: &Path) -> Result<ShimCopy, String> {
    prepare(dir)?;
    let source = std::fs::metadata(shim).map_err(|e| format!("reading it: {e}"))?;
    let name = format!(
        "{COPY_PREFIX}{:x}-{:x}-{:x}.{:09}-{:x}",
        source.dev(),
        source.ino(),
        source.mtime(),
        source.mtime_nsec(),
        source.size()
    );
    let path = dir.join(&name);
    for _ in 0..MAX_ATTEMPTS {
        if let Some(copy) = hold(&path, source.size())? {
            prune(dir, &path);
            return Ok(copy);
        }
        make(dir, shim, &path)?;
    }
    Err(format!(
        "{} was removed each time before it could be used",
        path.display()
    ))
}

/// Creates `dir` when it is missing, and checks it is a directory of this user's that no one
/// else may write (only then is what it holds this user's doing).
fn prepare(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    match DirBuilder::new().mode(COPY_MODE).create(dir) {
        Ok(()) => std::fs::set_permissions(dir, std::fs::Permissions::from_mode(COPY_MODE))
            .map_err(|e| format!("setting the mode of {shown}: {e}"))?,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating {shown}: {e}")),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("reading {shown}: {e}"))?;
    let me = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{shown} must be a directory of uid {me} that no one else may write (it is {}, \
             uid {}, mode {:04o}); remove it to have it made again",
            if meta.is_dir() {
                "a directory"
            } else {
                "not a directory"
            },
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// The copy at `path`, held, when it is there, complete (`size` bytes, mode 0755) and still
/// at that path once held.
fn hold(path: &Path, size: u64) -> Result<Option<ShimCopy>, String> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("opening {}: {e}", path.display())),
    };
    file.lock_shared()
        .map_err(|e| format!("locking {}: {e}", path.display()))?;
    let held = file
        .metadata()
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    let there = std::fs::symlink_metadata(path).ok();
    let same = there.is_some_and(|m| (m.dev(), m.ino()) == (held.dev(), held.ino()));
    if !same || held.len() != size || held.mode() & 0o7777 != COPY_MODE {
        // Removed by a probe that found it unheld, or never completed: made again.
        return Ok(None);
    }
    Ok(Some(ShimCopy {
        path: path.to_owned(),
        _held: file,
    }))
}

/// Copies `shim` to `path` through a partial file renamed into place, so no one sees half a
/// copy.
fn make(dir: &Path, shim: &Path, path: &Path) -> Result<(), String> {
    // The process and a count: several probes of one process may copy at once.
    static MADE: AtomicU64 = AtomicU64::new(0);
    let count = MADE.fetch_add(1, Ordering::Relaxed);
    let partial = dir.join(format!("{PARTIAL_PREFIX}{}-{count}", std::process::id()));
    let copied = std::fs::copy(shim, &partial)
        .and_then(|_| {
            std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(COPY_MODE))
        })
        .and_then(|()| std::fs::rename(&partial, path));
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(format!("copying it to {}: {e}", path.display()));
    }
    Ok(())
}

/// Removes the copies in `dir` other than `keep` that no one holds, and partial copies whose
/// process is gone. Best effort: whatever cannot be removed stays.
fn prune(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(rest) = name.strip_prefix(PARTIAL_PREFIX) {
            let pid = rest.split('-').next().unwrap_or(rest);
            if !Path::new("/proc").join(pid).exists() {
                let _ = std::fs::remove_file(&path);
            }
            continue;
        }
        if !name.starts_with(COPY_PREFIX) || path == keep {
            continue;
        }
        let Ok(file) = File::open(&path) else {
            continue;
        };
        match file.try_lock() {
            // No walls hold it: removed while locked, so no one takes it meanwhile.
            Ok(()) => {
                let _ = std::fs::remove_file(&path);
            }
            Err(TryLockError::WouldBlock | TryLockError::Error(_)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn shim(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("shim");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        path
    }

    fn copies(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_copy_is_0755_shared_while_held_and_removed_once_unheld() {
        let source = tempfile::tempdir().unwrap();
        let runtime = tempfile::tempdir().unwrap();
        let dir = runtime.path().join("bxsandbox");
        let first = shim(source.path(), "one");
        let a = copy_into(&dir, &first).unwrap();
        let b = copy_into(&dir, &first).unwrap();
        assert_eq!(a.path(), b.path(), "an unchanged shim is copied once");
        let meta = std::fs::metadata(a.path()).unwrap();
        assert_eq!(meta.mode() & 0o7777, 0o755);
        assert_eq!(std::fs::read_to_string(a.path()).unwrap(), "one");
        assert_eq!(
            std::fs::metadata(&dir).unwrap().mode() & 0o7777,
            0o755,
            "the directory is made 0755"
        );

        // A rebuilt shim: a copy of its own; the old one stays while held.
        std::fs::remove_file(&first).unwrap();
        let second = shim(source.path(), "two!");
        let c = copy_into(&dir, &second).unwrap();
        assert_ne!(c.path(), a.path());
        assert_eq!(copies(&dir).len(), 2, "{:?}", copies(&dir));
        let old = a.path().to_owned();
        drop((a, b));
        let d = copy_into(&dir, &second).unwrap();
        assert_eq!(d.path(), c.path());
        assert!(!old.exists(), "the unheld copy is removed");
        assert_eq!(copies(&dir).len(), 1);
    }

    #[test]
    fn a_directory_others_may_write_is_refused_by_name() {
        let source = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = copy_into(dir.path(), &shim(source.path(), "x")).unwrap_err();
        assert!(
            why.starts_with(&format!("{} must be", dir.path().display())),
            "{why}"
        );
        assert!(why.contains("mode 0777"), "{why}");
    }
}
