//! Making a session's directory atomically, and clearing what crashes left.
//!
//! A session exists once its directory holds a log. A new session's directory is made under a
//! temporary name that is never a session id (`.creating-<id>.<pid>`), its header line is
//! written and synced there, and only then is it renamed into place: a crash or a full disk at
//! any step leaves either no session or a whole one, never a directory without a log (which
//! once made an id unusable for good: "already exists" to a task, 404 to `show`).
//!
//! What a crash can still leave (a half-made directory, a temporary file of a durable write,
//! or a directory without a log made by an older loopd) is never read as a session, is
//! cleared when the id is created, and is removed at start ([`super::Store::remove_stale`]).

use super::OUTPUTS_DIR;
use super::fsync::{is_temp_name, sync_dir};
use super::{LOG_FILE, Session, StoreError};
use bxcore::SessionId;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

/// The start of the name of a session directory being made. Session ids never start with
/// `.`, so no such name is ever taken for a session.
pub const CREATING_PREFIX: &str = ".creating-";

/// Makes session `id`'s directory `dir` in `sessions_dir`, holding a durable log with its
/// header; [`StoreError::Exists`] when the session has a log already.
pub(super) fn make(sessions_dir: &Path, id: &SessionId, dir: &Path) -> Result<(), StoreError> {
    if has_log(dir) {
        return Err(StoreError::Exists(id.clone()));
    }
    let tmp = sessions_dir.join(format!("{CREATING_PREFIX}{id}.{}", std::process::id()));
    let made = build(&tmp, id).and_then(|()| place(sessions_dir, &tmp, dir, id));
    if made.is_err() {
        // Nothing of a failed creation stays: the id is as it was.
        let _ = std::fs::remove_dir_all(&tmp);
    }
    made
}

/// Whether `dir` holds a session's log.
pub(super) fn has_log(dir: &Path) -> bool {
    dir.join(LOG_FILE).is_file()
}

/// The new directory at `tmp`, with the header written and synced.
fn build(tmp: &Path, id: &SessionId) -> Result<(), StoreError> {
    // Left by an earlier process of the same pid: a half-made directory of this very id.
    match std::fs::remove_dir_all(tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io(tmp, e)),
    }
    std::fs::create_dir(tmp).map_err(|e| StoreError::io(tmp, e))?;
    Session::write_header(id, tmp)
}

/// Renames the made directory `tmp` to `dir` (over a directory a crash left without a log,
/// once it is cleared), and syncs `sessions_dir` so the name is durable.
fn place(sessions_dir: &Path, tmp: &Path, dir: &Path, id: &SessionId) -> Result<(), StoreError> {
    // A rename over an empty directory replaces it; over one that holds anything it fails.
    if let Err(e) = std::fs::rename(tmp, dir) {
        if !dir.is_dir() {
            return Err(StoreError::io(dir, e));
        }
        if has_log(dir) {
            return Err(StoreError::Exists(id.clone()));
        }
        clear_leftover(dir)?;
        std::fs::rename(tmp, dir).map_err(|e| StoreError::io(dir, e))?;
    }
    sync_dir(sessions_dir)
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
