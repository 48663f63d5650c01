//! A bound path resolved once and held open: what a run binds is the directory or file the
//! path named when it was pinned, never what it names later.
//!
//! Why: a path re-resolved at every run can be redirected between runs by whoever can write
//! one of its parent directories. A grant whose `ro_paths` entry lies beneath a writable
//! directory lets a first run rename the entry's parent and plant a symlink to `/` in its
//! place; a second run would then bind the host's root. So a [`Pinned`] path is resolved
//! (`canonicalize`) and opened `O_PATH | O_NOFOLLOW` once; every run
//!
//! - checks that the path as configured still resolves to the same place, device and inode
//!   ([`Pinned::check`]), and refuses the run, naming the path, when it does not; and
//! - binds the open descriptor itself (bubblewrap's `--bind-fd` / `--ro-bind-fd`), so even a
//!   swap between that check and bubblewrap's mount cannot change what is bound.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a path could not be pinned, or no longer names what was pinned.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// The path could not be resolved (it does not exist, or a component cannot be searched).
    #[error("{path}: cannot resolve it: {source}")]
    Resolve {
        /// The path as given.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The path is not valid UTF-8, so it cannot be handed to bubblewrap and the shim.
    #[error("{path}: not valid UTF-8")]
    NotUtf8 {
        /// The path as given.
        path: PathBuf,
    },
    /// The resolved path could not be opened or examined.
    #[error("{path}: cannot open it: {source}")]
    Open {
        /// The resolved path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The path was swapped while it was being pinned.
    #[error("{path}: it changed while it was being pinned; try again")]
    Raced {
        /// The path as given.
        path: PathBuf,
    },
    /// The path no longer resolves to the file it named when it was pinned.
    #[error(
        "{path} no longer names what it named when it was pinned ({pinned}, device {dev} inode \
         {ino}); it now resolves to {now}: it was moved or replaced (a symlink planted in its \
         place?), so it is not bound and nothing ran. A path is resolved once; re-pin it (restart \
         the daemon) to take a new one"
    )]
    Moved {
        /// The path as given.
        path: PathBuf,
        /// What it resolved to when pinned.
        pinned: PathBuf,
        /// What it resolves to now (with its device and inode when they differ).
        now: String,
        /// The pinned device.
        dev: u64,
        /// The pinned inode.
        ino: u64,
    },
}

/// A path resolved once and held open (`O_PATH | O_NOFOLLOW`); see the module's doc.
#[derive(Clone)]
pub struct Pinned {
    configured: PathBuf,
    resolved: PathBuf,
    fd: Arc<OwnedFd>,
    dev: u64,
    ino: u64,
}

impl Pinned {
    /// Resolves `path` and opens what it names, refusing a path that does not exist, is not
    /// UTF-8, or is swapped while this runs.
    pub fn new(path: impl AsRef<Path>) -> Result<Pinned, PinError> {
        let configured = path.as_ref().to_owned();
        let resolved = resolve(&configured)?;
        let file = File::options()
            .read(true)
            // O_PATH: a handle that names the file, reads nothing, and can be bound; the
            // resolved path holds no symlink, and O_NOFOLLOW refuses one planted since.
            .custom_flags(nix::libc::O_PATH | nix::libc::O_NOFOLLOW)
            .open(&resolved)
            .map_err(|source| PinError::Open {
                path: resolved.clone(),
                source,
            })?;
        let meta = file.metadata().map_err(|source| PinError::Open {
            path: resolved.clone(),
            source,
        })?;
        // An intermediate component swapped between the resolution and the open would give
        // a descriptor of something else: resolve again and compare.
        if resolve(&configured)? != resolved
            || identity(&resolved) != Some((meta.dev(), meta.ino()))
        {
            return Err(PinError::Raced { path: configured });
        }
        Ok(Pinned {
            configured,
            resolved,
            fd: Arc::new(file.into()),
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    /// The path as it was given.
    pub fn configured(&self) -> &Path {
        &self.configured
    }

    /// What it resolved to when pinned: where it is bound inside the sandbox.
    pub fn path(&self) -> &Path {
        &self.resolved
    }

    /// Whether the path as given still resolves to the place, device and inode it did when
    /// pinned: `Moved` names the path and what it resolves to now when it does not.
    pub fn check(&self) -> Result<(), PinError> {
        let now = resolve(&self.configured)?;
        let now_id = identity(&now);
        if now == self.resolved && now_id == Some((self.dev, self.ino)) {
            return Ok(());
        }
        let now = match now_id {
            Some((dev, ino)) if now == self.resolved => {
                format!("{} (device {dev} inode {ino})", now.display())
            }
            _ => now.display().to_string(),
        };
        Err(PinError::Moved {
            path: self.configured.clone(),
            pinned: self.resolved.clone(),
            now,
            dev: self.dev,
            ino: self.ino,
        })
    }

    /// A duplicate of the pinned descriptor (close-on-exec, `O_PATH`): for one run to hand
    /// bubblewrap, or to walk what is beneath the pinned directory without resolving its path.
    pub fn descriptor(&self) -> std::io::Result<OwnedFd> {
        self.fd.as_fd().try_clone_to_owned()
    }
}

impl PartialEq for Pinned {
    fn eq(&self, other: &Pinned) -> bool {
        self.configured == other.configured
            && self.resolved == other.resolved
            && (self.dev, self.ino) == (other.dev, other.ino)
    }
}

impl Eq for Pinned {}

impl std::fmt::Debug for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pinned")
            .field("configured", &self.configured)
            .field("resolved", &self.resolved)
            .field("dev", &self.dev)
            .field("ino", &self.ino)
            .finish()
    }
}

fn resolve(path: &Path) -> Result<PathBuf, PinError> {
    let resolved = std::fs::canonicalize(path).map_err(|source| PinError::Resolve {
        path: path.to_owned(),
        source,
    })?;
    if resolved.to_str().is_none() {
        return Err(PinError::NotUtf8 {
            path: path.to_owned(),
        });
    }
    Ok(resolved)
}

/// The device and inode `path` names now (following nothing: it is resolved already).
fn identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_missing_path_is_refused_by_name() {
        let err = Pinned::new("/nonexistent/bxsandbox")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("/nonexistent/bxsandbox: cannot resolve"),
            "{err}"
        );
    }

    #[test]
    fn a_path_replaced_by_a_symlink_after_pinning_is_refused_naming_both() {
        let dir = tempfile::tempdir().unwrap();
        let entry = dir.path().join("a/b");
        std::fs::create_dir_all(&entry).unwrap();
        let pinned = Pinned::new(&entry).unwrap();
        pinned.check().unwrap();
        std::fs::rename(dir.path().join("a"), dir.path().join("a2")).unwrap();
        std::fs::create_dir(dir.path().join("a")).unwrap();
        std::os::unix::fs::symlink("/", &entry).unwrap();
        let err = pinned.check().unwrap_err().to_string();
        assert!(err.contains(entry.to_str().unwrap()), "{err}");
        assert!(err.contains("it now resolves to /:"), "{err}");
    }

    #[test]
    fn a_directory_replaced_in_place_is_refused_by_its_inode() {
        let dir = tempfile::tempdir().unwrap();
        let entry = dir.path().join("a");
        std::fs::create_dir(&entry).unwrap();
        let pinned = Pinned::new(&entry).unwrap();
        std::fs::rename(&entry, dir.path().join("old")).unwrap();
        std::fs::create_dir(&entry).unwrap();
        let err = pinned.check().unwrap_err().to_string();
        assert!(err.contains("(device"), "{err}");
    }
}
