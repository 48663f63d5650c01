//! The session store: one directory per session under `<state dir>/sessions/`, holding an
//! append-only, hash-chained log (`log.jsonl`) and one baseline per epoch
//! (in the log from format 2 on; `baseline-<epoch>.json` beside a log of format 1).
//!
//! Invariants:
//! - a record is on disk (`fdatasync`) before `append` returns; one appended with
//!   `append_synced_with_next` (a turn's answer) is on disk with the next append (its end);
//! - every line carries its sequence number and a sha256 digest chained to the line before;
//!   on open every line is checked, and a damaged or misplaced line is an error naming the file
//!   and line: the log is refused, never rewritten;
//! - a crash mid-write leaves at most a torn last line, which open cuts off (and logs);
//! - a turn left unfinished gets an `interrupted` turn end on open, after a `void` decision for
//!   each approval it still waited for and a result saying it may not have run for each
//!   approved call whose result never came (see [`recover`]);
//! - one open [`Session`] per id: an in-process hold plus an exclusive lock on the log file;
//! - an epoch's baseline is written once and never changes;
//! - a session is created whole or not at all: a directory without a log is no session, and
//!   what a crash leaves is cleared (see [`create`]).

mod baseline;
pub(crate) mod create;
mod error;
mod fsync;
mod hold;
mod index;
mod line;
mod log;
pub mod recover;
mod scan;
#[cfg(test)]
mod tests;
mod timing;

pub use baseline::{BASELINE_FORMAT_VERSION, Baseline};
pub use error::StoreError;
use fsync::Syncs;
pub(crate) use fsync::{is_temp_name, replace_file};
pub use hold::{Hold, Holds};
pub use index::{Index, Summary};
pub use log::{LOG_FILE, STOPPED_WHILE_WAITING, Session};
pub use recover::{APPROVED_WITHOUT_RESULT, LeftApproval, LeftAs, left_unfinished};
pub use timing::AppendTimes;

/// The directory, inside a session's directory, that holds its stored outputs.
pub const OUTPUTS_DIR: &str = "outputs";

use bxcore::{LogRecord, SessionId};
use std::path::{Path, PathBuf};

/// The sessions under one state directory.
#[derive(Debug, Clone)]
pub struct Store {
    sessions_dir: PathBuf,
    holds: Holds,
    index: Index,
    append_times: AppendTimes,
    syncs: Syncs,
}

impl Store {
    /// The store under `state_dir` (its `sessions/` directory is made if missing).
    pub fn new(state_dir: &Path) -> Result<Store, StoreError> {
        let sessions_dir = state_dir.join("sessions");
        std::fs::create_dir_all(&sessions_dir).map_err(|e| StoreError::io(&sessions_dir, e))?;
        Ok(Store {
            sessions_dir,
            holds: Holds::default(),
            index: Index::default(),
            append_times: AppendTimes::default(),
            syncs: Syncs::default(),
        })
    }

    /// This store, its sessions' appends timed into `append_times` (loopd's metrics).
    #[must_use]
    pub fn with_append_times(mut self, append_times: AppendTimes) -> Store {
        self.append_times = append_times;
        self
    }

    /// The store a session in `sessions_dir` came from, sharing its holds, its index, where
    /// its appends are timed and its syncs counted.
    pub(crate) fn from_parts(sessions_dir: PathBuf, holds: Holds, shared: log::Shared) -> Store {
        Store {
            sessions_dir,
            holds,
            index: shared.index,
            append_times: shared.append_times,
            syncs: shared.syncs,
        }
    }

    /// The syncs (`fsync`, `fdatasync`) this store and the sessions it opened made so far.
    pub fn syncs(&self) -> u64 {
        self.syncs.count()
    }

    /// What an opened session shares with its store.
    fn shared(&self) -> log::Shared {
        log::Shared {
            index: self.index.clone(),
            append_times: self.append_times.clone(),
            syncs: self.syncs.clone(),
        }
    }

    /// The directory of session `id`.
    pub fn dir(&self, id: &SessionId) -> PathBuf {
        self.sessions_dir.join(id.as_str())
    }

    /// Begins session `id` (see [`create`]): it is made, whole and durable, by its first
    /// synced append, and made not at all if dropped before. A directory a crash left without
    /// a log is taken over then; one that holds files loopd did not make is
    /// [`StoreError::Orphan`].
    pub fn create(&self, id: &SessionId) -> Result<Session, StoreError> {
        let hold = self.hold(id)?;
        let dir = self.dir(id);
        let unplaced = create::Unplaced::begin(&self.sessions_dir, id, &dir)?;
        Session::begin(id.clone(), dir, unplaced, hold, self.shared())
    }

    /// Removes what crashes left (half-made sessions, temporary files of durable writes,
    /// directories without a log); returns what it removed. For the daemon at start, before
    /// anything writes: a temporary file in use would be taken from its writer.
    pub fn remove_stale(&self) -> Vec<PathBuf> {
        create::remove_stale(&self.sessions_dir)
    }

    /// Opens session `id` for appending: recovers it (see the module's invariants) and holds
    /// it until the [`Session`] is dropped. A held session is [`StoreError::Busy`].
    pub fn open(&self, id: &SessionId) -> Result<Session, StoreError> {
        let hold = self.hold(id)?;
        Session::open(id.clone(), self.dir(id), hold, self.shared())
    }

    /// Opens session `id`, creating it first if it does not exist.
    pub fn open_or_create(&self, id: &SessionId) -> Result<Session, StoreError> {
        match self.open(id) {
            Err(StoreError::NotFound(_)) => self.create(id),
            other => other,
        }
    }

    /// Every session's id, sorted.
    pub fn list(&self) -> Result<Vec<SessionId>, StoreError> {
        let entries = std::fs::read_dir(&self.sessions_dir)
            .map_err(|e| StoreError::io(&self.sessions_dir, e))?;
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io(&self.sessions_dir, e))?;
            let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|n| SessionId::new(n).ok())
            else {
                continue;
            };
            if create::has_log(&entry.path()) {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Every session with its record count and last turn, sorted by id, from the index: no
    /// log is read once it is built (the first call builds it, reading each log once; a log
    /// that cannot be read is listed with zeros, and `show` names its damage).
    pub fn summaries(&self) -> Result<Vec<(SessionId, Summary)>, StoreError> {
        let mut failed = None;
        let all = self.index.all(|| {
            let ids = match self.list() {
                Ok(ids) => ids,
                Err(e) => {
                    failed = Some(e);
                    return Default::default();
                }
            };
            ids.into_iter()
                .map(|id| {
                    let summary = self.read(&id).map(|r| summary_of(&r)).unwrap_or_default();
                    (id, summary)
                })
                .collect()
        });
        match failed {
            // Not built: the next call tries again.
            Some(e) => {
                self.index.forget();
                Err(e)
            }
            None => Ok(all),
        }
    }

    /// Reads session `id`'s records without holding it or changing anything: every whole line
    /// is checked; a line being written (or torn) at the end is left out.
    pub fn read(&self, id: &SessionId) -> Result<Vec<LogRecord>, StoreError> {
        let path = self.dir(id).join(LOG_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound(id.clone()));
            }
            Err(e) => return Err(StoreError::io(&path, e)),
        };
        Ok(scan::scan(&path, id, &bytes)?.records)
    }

    /// Whether session `id` exists (has a log).
    pub fn exists(&self, id: &SessionId) -> bool {
        create::has_log(&self.dir(id))
    }

    /// Whether session `id` is open (held) in this process now.
    pub fn is_held(&self, id: &SessionId) -> bool {
        self.holds.is_held(id)
    }

    fn hold(&self, id: &SessionId) -> Result<Hold, StoreError> {
        self.holds
            .take(id)
            .ok_or_else(|| StoreError::Busy(id.clone()))
    }
}

/// The summary of a log's records: how many, the highest turn number, and the turn left open.
pub fn summary_of(records: &[LogRecord]) -> Summary {
    let last_turn = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::User { turn, .. } => Some(*turn),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let open_turn = records.iter().rev().find_map(|r| match r {
        LogRecord::User { turn, .. } => Some(Some(*turn)),
        LogRecord::TurnEnd { .. } => Some(None),
        _ => None,
    });
    Summary {
        records: records.len() as u64,
        last_turn,
        open_turn: open_turn.flatten(),
    }
}
