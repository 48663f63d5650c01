//! Making a session's directory atomically, and clearing what crashes left.
//!
//! A session exists once its directory holds a log. A new session's directory is made under a
//! temporary name that is never a session id (`.creating-<id>.<pid>`), its log begun there
//! with the header line ([`Unplaced`]), and the directory is put in place only by the log's
//! first synced append (the first task's user record, or a child's inherited labels): that
//! one `fdatasync` covers the header and the record, then the directory is synced (the log's
//! name) and renamed into place, and the sessions directory synced (the session's name).
//! So a crash or a full disk at any step leaves either no session or a whole one, never a
//! directory without a log (which once made an id unusable for good: "already exists" to a
//! task, 404 to `show`), and a session whose first task was refused is not made at all.
//!
//! What a crash can still leave (a half-made directory, a temporary file of a durable write,
//! or a directory without a log made by an older loopd) is never read as a session, is
//! cleared when the id is created, and is removed at start ([`super::Store::remove_stale`]).

use super::OUTPUTS_DIR;
use super::fsync::{Syncs, is_temp_name, sync_dir};
use super::{LOG_FILE, StoreError};
use bxcore::SessionId;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// The start of the name of a session directory being made. Session ids never start with
/// `.`, so no such name is ever taken for a session.
pub const CREATING_PREFIX: &str = ".creating-";

/// A new session's directory under its temporary name, until its first synced append puts it
/// in place; removed if dropped before.
#[derive(Debug)]
pub(super) struct Unplaced {
    tmp: PathBuf,
    sessions_dir: PathBuf,
    placed: bool,
}

impl Unplaced {
    /// Makes the temporary directory of session `id`, whose place is `dir` in
    /// `sessions_dir`; [`StoreError::Exists`] when the session has a log already.
    pub fn begin(sessions_dir: &Path, id: &SessionId, dir: &Path) -> Result<Unplaced, StoreError> {
        if has_log(dir) {
            return Err(StoreError::Exists(id.clone()));
        }
        let tmp = sessions_dir.join(format!("{CREATING_PREFIX}{id}.{}", std::process::id()));
        // Left by an earlier process of the same pid: a half-made directory of this very id.
        match std::fs::remove_dir_all(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io(&tmp, e)),
        }
        std::fs::create_dir(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
        Ok(Unplaced {
            tmp,
            sessions_dir: sessions_dir.to_path_buf(),
            placed: false,
        })
    }

    /// The directory, under its temporary name.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// Puts the directory in place as `dir`, durably, once its log is synced: its own entries
    /// synced, then renamed (over a directory a crash left without a log, once it is
    /// cleared), then the sessions directory synced.
    pub fn place(&mut self, dir: &Path, id: &SessionId, syncs: &Syncs) -> Result<(), StoreError> {
        sync_dir(&self.tmp, syncs)?;
        // A rename over an empty directory replaces it; over one that holds anything it fails.
        if let Err(e) = std::fs::rename(&self.tmp, dir) {
            if !dir.is_dir() {
                return Err(StoreError::io(dir, e));
            }
            if has_log(dir) {
                return Err(StoreError::Exists(id.clone()));
            }
            clear_leftover(dir)?;
            std::fs::rename(&self.tmp, dir).map_err(|e| StoreError::io(dir, e))?;
        }
        self.placed = true;
        sync_dir(&self.sessions_dir, syncs)
    }
}

impl Drop for Unplaced {
    fn drop(&mut self) {
        if !self.placed {
            // Nothing of a creation that never got its first record stays: the id is as it was.
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Whether `dir` holds a session's log.
pub(super) fn has_log(dir: &Path) -> bool {
    dir.join(LOG_FILE).is_file()
}

/// Removes `dir`, a session directory without a log, when it holds only loopd's temporary
/// files; refuses (and leaves it) when it holds anything else.
fn clear_leftover(dir: &Path) -> Result<(), StoreError> {
    let mut removed = Vec::new();
    remove_temp_files(dir, &mut removed);
    match std::fs::remove_dir(dir) {
        Ok(()) => {
            tracing::warn!(dir = %dir.display(), "removed a session directory without a log left by a crash");
            Ok(())
        }
        Err(_) if dir.read_dir().is_ok_and(|mut d| d.next().is_some()) => {
            Err(StoreError::Orphan(dir.to_path_buf()))
        }
        Err(e) => Err(StoreError::io(dir, e)),
    }
}

/// Removes what crashes left in `sessions_dir` (see the module's documentation); returns what
/// was removed. A failure to remove something is logged and the rest goes on.
pub(super) fn remove_stale(sessions_dir: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let entries = match std::fs::read_dir(sessions_dir) {
        Ok(entries) => entries,
        Err(e) => {
            tracing::warn!(dir = %sessions_dir.display(), "cannot look for leftovers: {e}");
            return removed;
        }
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !path.is_dir() {
            continue;
        }
        if name.starts_with(CREATING_PREFIX) {
            remove(&path, std::fs::remove_dir_all(&path), &mut removed);
        } else if SessionId::new(&name).is_ok() {
            remove_temp_files(&path, &mut removed);
            remove_temp_files(&path.join(OUTPUTS_DIR), &mut removed);
            if !has_log(&path) {
                match clear_leftover(&path) {
                    Ok(()) => removed.push(path),
                    Err(e) => tracing::warn!("a session directory without a log: {e}"),
                }
            }
        }
    }
    if !removed.is_empty() {
        tracing::warn!(
            count = removed.len(),
            "removed what earlier crashes left in the session store"
        );
    }
    removed
}

/// Removes the temporary files of durable writes (`*.tmp.<pid>`) directly in `dir`.
fn remove_temp_files(dir: &Path, removed: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let temp = entry.file_name().to_str().is_some_and(is_temp_name);
        if temp && path.is_file() {
            remove(&path, std::fs::remove_file(&path), removed);
        }
    }
}

fn remove(path: &Path, result: std::io::Result<()>, removed: &mut Vec<PathBuf>) {
    match result {
        Ok(()) => removed.push(path.to_path_buf()),
        Err(e) => tracing::warn!(path = %path.display(), "cannot remove a leftover: {e}"),
    }
}
