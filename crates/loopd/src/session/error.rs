//! What can go wrong with a session's files.

use bxcore::SessionId;
use std::path::PathBuf;

/// An error of the session store. Each one names the session or file it is about.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file system refused an operation.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error from the system.
        #[source]
        source: std::io::Error,
    },
    /// A line of a log is damaged or out of place; the log is left as it is.
    #[error("{path} line {line}: {why}")]
    Corrupt {
        /// The log file.
        path: PathBuf,
        /// The line, from 1.
        line: u64,
        /// What is wrong with it.
        why: String,
    },
    /// The session is held by a turn (in this process or another).
    #[error("session {0} is busy: another turn holds it")]
    Busy(SessionId),
    /// A session of that id already exists.
    #[error("session {0} already exists")]
    Exists(SessionId),
    /// No session of that id exists.
    #[error("no session {0}")]
    NotFound(SessionId),
    /// A session directory without a log (left by a crash?) holds files loopd did not make;
    /// loopd leaves them, so the id cannot be created until someone looks.
    #[error(
        "{0}: a session directory with no log (left by a crash?) holds files loopd did not \
         make; move it away to use this session id"
    )]
    Orphan(PathBuf),
    /// An epoch's baseline is written once and never changed.
    #[error("{path}: the baseline of epoch {epoch} was already written and never changes")]
    BaselineExists {
        /// The baseline's file, or the log that holds it.
        path: PathBuf,
        /// Its epoch.
        epoch: u32,
    },
    /// A record that may not be appended (e.g. a second header).
    #[error("session {session}: cannot append a {kind} record: {why}")]
    BadRecord {
        /// The session.
        session: SessionId,
        /// The record's type.
        kind: &'static str,
        /// Why not.
        why: String,
    },
    /// An earlier write failed half-way and could not be undone; the session must be reopened.
    #[error("session {0}: an earlier write failed and could not be undone; reopen the session")]
    Poisoned(SessionId),
}

impl StoreError {
    /// Whether the file system is full or the user's quota spent (`ENOSPC`, `EDQUOT`):
    /// nothing more can be written until space is made.
    pub fn is_disk_full(&self) -> bool {
        matches!(
            self,
            StoreError::Io { source, .. }
                if matches!(source.kind(), std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded)
        )
    }

    /// An I/O error about `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: path.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_full_disk_and_a_spent_quota_are_told_from_other_failures() {
        let io = |code| StoreError::io("/s/log.jsonl", std::io::Error::from_raw_os_error(code));
        assert!(io(nix::libc::ENOSPC).is_disk_full());
        assert!(io(nix::libc::EDQUOT).is_disk_full());
        assert!(!io(nix::libc::EACCES).is_disk_full());
        assert!(!StoreError::NotFound(SessionId::new("a").unwrap()).is_disk_full());
    }
}
