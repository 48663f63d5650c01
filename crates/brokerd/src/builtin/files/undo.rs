//! Undoing the writes of a session's last turns (the records of `crate::checkpoints`): every file put back as it was before the
//! turns, in the reverse order of the writes, or nothing at all when a file was changed since
//! by something else (its content is not what the last write left) or what it held before is
//! no longer kept.
//!
//! Each file is put back like a write: a temporary file beside it, synced, renamed over it,
//! the directory synced; a file that was not there is removed. Everything is opened beneath the
//! grant's root through its fd, following no symlink. Each record is marked undone once its
//! file is back, so an undo cut short by a crash can be run again: what is back is skipped, the
//! rest still matches.

use super::beneath::Root;
use crate::checkpoints::{CheckpointError, Checkpoints, Record, State, digest};
use bxcore::SessionId;
use proto::PutBack;
use rustix::fs::{AtFlags, Mode, OFlags, fchmod, openat, renameat, unlinkat};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The permission bits (less the umask) of a directory an undo makes again, as `mkdir -p`.
const RESTORED_DIR_MODE: u32 = 0o755;

/// The most bytes of a file read to compare it with what a write left.
const MAX_COMPARED_BYTES: u64 = 64 * 1024 * 1024;

/// Why an undo did nothing.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// A file holds something else than what the turn's last write left.
    #[error(
        "{path} was changed since turn {turn} wrote it (it is not what that write left): \
         nothing was undone; put it back as turn {turn} left it, or undo fewer turns"
    )]
    ChangedSince {
        /// The file.
        path: PathBuf,
        /// The turn of the last write to it.
        turn: u64,
    },
    /// What a file held before is no longer kept (the bounds dropped it).
    #[error(
        "what {path} held before turn {turn} is no longer kept ([checkpoints] max_bytes or \
         keep_turns): nothing was undone"
    )]
    Lost {
        /// The file.
        path: PathBuf,
        /// The turn.
        turn: u64,
    },
    /// A file could not be put back; those before it in the list are back.
    #[error("cannot put {path} back: {source}")]
    PutBack {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// brokerd's audit log could not record the undo, so nothing was done.
    #[error("nothing was undone: brokerd's audit log cannot record it ({0})")]
    NotAudited(String),
    /// The store could not be written.
    #[error(transparent)]
    Store(#[from] CheckpointError),
}

/// Undoes the writes of `session`'s turns from `from_turn` on (all of them when `dry_run` is
/// false; none, only the list, when it is true). The list of files, in the order they are put
/// back.
pub fn undo(
    store: &Checkpoints,
    session: &SessionId,
    from_turn: u64,
    dry_run: bool,
) -> Result<Vec<PutBack>, UndoError> {
    let mut records: Vec<Record> = store
        .records(session)
        .into_iter()
        .filter(|r| r.turn >= from_turn)
        .collect();
    records.sort_by_key(|r| std::cmp::Reverse(r.seq));
    check(store, &records)?;
    let plan: Vec<PutBack> = records
        .iter()
        .map(|r| PutBack {
            path: r.path(),
            turn: r.turn,
            removed: r.before.is_none(),
        })
        .collect();
    if dry_run {
        return Ok(plan);
    }
    for record in &records {
        let content = match &record.before {
            Some(before) => Some((blob_of(store, record, &before.sha256)?, before.mode)),
            None => None,
        };
        put_back(record, content).map_err(|source| UndoError::PutBack {
            path: record.path(),
            source,
        })?;
        store.set_state(record.seq, State::Undone)?;
    }
    tracing::info!(%session, from_turn, files = plan.len(), "undid the writes of turns");
    Ok(plan)
}

/// That every file holds what its last write left, and every earlier content is kept.
fn check(store: &Checkpoints, newest_first: &[Record]) -> Result<(), UndoError> {
    let mut seen = HashSet::new();
    for record in newest_first {
        if seen.insert(record.path()) {
            let now = match read_beneath(&record.root, &record.rel) {
                Ok(content) => Some(Some(digest(&content))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(None),
                // Unreadable (a symlink planted there, a directory): not what the turn left.
                Err(_) => None,
            };
            if now.as_ref().map(Option::as_deref) != Some(record.left()) {
                return Err(UndoError::ChangedSince {
                    path: record.path(),
                    turn: record.turn,
                });
            }
        }
        if let Some(before) = &record.before {
            blob_of(store, record, &before.sha256)?;
        }
    }
    Ok(())
}

/// Blob `sha256` of `record`, or [`UndoError::Lost`].
fn blob_of(store: &Checkpoints, record: &Record, sha256: &str) -> Result<Vec<u8>, UndoError> {
    store.blob(sha256).ok_or_else(|| UndoError::Lost {
        path: record.path(),
        turn: record.turn,
    })
}

/// The content of `rel` beneath `root`, opened following no symlink.
pub(crate) fn read_beneath(root: &Path, rel: &Path) -> std::io::Result<Vec<u8>> {
    let root = Root::open(root)?;
    let fd = root.open_at(rel, OFlags::RDONLY)?;
    let mut content = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_COMPARED_BYTES)
        .read_to_end(&mut content)?;
    Ok(content)
}

/// Puts `record`'s file back: `content` with its mode, or removed when none.
fn put_back(record: &Record, content: Option<(Vec<u8>, u32)>) -> std::io::Result<()> {
    let (Some(parent), Some(name)) = (record.rel.parent(), record.rel.file_name()) else {
        return Err(std::io::Error::other("not a file beneath its root"));
    };
    let root = Root::open(&record.root)?;
    let Some((content, mode)) = content else {
        let dir: OwnedFd = root.open_at(parent, OFlags::RDONLY | OFlags::DIRECTORY)?;
        unlinkat(&dir, name, AtFlags::empty())?;
        return Ok(rustix::fs::fsync(&dir)?);
    };
    let dir = open_or_make_dirs(&root, parent)?;
    let temp = format!(".brokerd-undo-{}-{}.tmp", std::process::id(), record.seq);
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW;
    let fd = openat(
        &dir,
        temp.as_str(),
        flags | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut file = std::fs::File::from(fd);
    let written = file
        .write_all(&content)
        .and_then(|()| Ok(fchmod(&file, Mode::from_raw_mode(mode))?))
        .and_then(|()| file.sync_all())
        .and_then(|()| Ok(renameat(&dir, temp.as_str(), &dir, name)?));
    if let Err(e) = written {
        let _ = unlinkat(&dir, temp.as_str(), AtFlags::empty());
        return Err(e);
    }
    Ok(rustix::fs::fsync(&dir)?)
}

/// The directory `rel` beneath `root`, each missing directory on the way made
/// ([`RESTORED_DIR_MODE`]): an exec's run may have removed the directory of a file it removed.
fn open_or_make_dirs(root: &Root, rel: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = root.open_at(Path::new(""), OFlags::RDONLY | OFlags::DIRECTORY)?;
    for component in rel.components() {
        let std::path::Component::Normal(name) = component else {
            return Err(std::io::Error::other("not a path beneath its root"));
        };
        dir = match openat(&dir, name, flags, Mode::empty()) {
            Err(rustix::io::Errno::NOENT) => {
                rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(RESTORED_DIR_MODE))?;
                openat(&dir, name, flags, Mode::empty())?
            }
            opened => opened?,
        };
    }
    Ok(dir)
}

#[cfg(test)]
mod runs_tests;
#[cfg(test)]
mod tests;
