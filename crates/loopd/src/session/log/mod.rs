//! An open session: its log, held for appending, and what its records say so far.

use super::StoreError;
use super::baseline::{self, Baseline};
use super::create::Unplaced;
use super::fsync::Syncs;
use super::hold::Hold;
use super::index::{Index, Summary};
use super::line::{self, GENESIS_DIGEST};
use super::scan::scan;
use super::timing::AppendTimes;
use bxcore::{ApprovalId, Labels, LogRecord, SessionId, Timestamp};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Instant;

mod baselines;
mod view;

/// The log file's name inside a session directory.
pub const LOG_FILE: &str = "log.jsonl";
/// The reason of the void decision recorded, on the next open, for an approval whose call was
/// still waiting when loopd stopped.
pub const STOPPED_WHILE_WAITING: &str = "loopd stopped while the call waited";

/// A session opened for appending. While it exists no other `Session` for the same id can be
/// opened, in this process (the hold) or another (an exclusive lock on the log file).
#[derive(Debug)]
pub struct Session {
    id: SessionId,
    dir: PathBuf,
    path: PathBuf,
    file: File,
    /// Bytes of whole lines in the file: where the next line starts.
    len_bytes: u64,
    records: Vec<LogRecord>,
    last_digest: String,
    /// Index in `records` where the current epoch starts (its `EpochStart`, or 0).
    epoch_start: usize,
    epoch: u32,
    last_turn: u64,
    open_turn: Option<u64>,
    last_call: u64,
    /// The approvals asked in the open turn, in order.
    approvals: Vec<ApprovalId>,
    /// The join of the labels this session inherited (`Inherited` records): a floor under its
    /// context label for its whole life.
    inherited: Labels,
    /// The top-level session and turn this session's calls count against, when it was started
    /// by another session.
    root_turn: Option<(SessionId, u64)>,
    /// Set when a failed write could not be undone: nothing more may be appended.
    poisoned: bool,
    /// The current epoch's baseline, once written.
    baseline: Option<Baseline>,
    _hold: Hold,
    /// The store's index, told of every append.
    index: Index,
    /// Where each append's duration goes.
    append_times: AppendTimes,
    /// The `fdatasync`s appends made since the session was opened.
    data_syncs: u64,
    /// Every sync of the store's sessions.
    syncs: Syncs,
    /// The log's format version (its header's).
    version: u32,
    /// A new session's directory until its first synced append puts it in place.
    unplaced: Option<Unplaced>,
}

/// What a session shares with the store that opened it.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    /// The store's index.
    pub index: Index,
    /// Where appends are timed.
    pub append_times: AppendTimes,
    /// Where syncs are counted.
    pub syncs: Syncs,
}

impl Session {
    /// Opens the log at `dir`, cuts a torn last line, checks every line, and ends a turn that
    /// was left unfinished as `interrupted` (its approvals first: `recover`).
    pub(crate) fn open(
        id: SessionId,
        dir: PathBuf,
        hold: Hold,
        shared: Shared,
    ) -> Result<Session, StoreError> {
        let path = dir.join(LOG_FILE);
        let mut file = match OpenOptions::new().read(true).append(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NotFound(id));
            }
            Err(e) => return Err(StoreError::io(&path, e)),
        };
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(StoreError::Busy(id)),
            Err(TryLockError::Error(e)) => return Err(StoreError::io(&path, e)),
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| StoreError::io(&path, e))?;
        let found = scan(&path, &id, &bytes)?;
        if found.torn_bytes > 0 {
            tracing::warn!(
                session = %id,
                torn_bytes = found.torn_bytes,
                "cutting a torn last line left by a crash mid-write"
            );
            shared.syncs.one();
            file.set_len(found.whole_bytes)
                .and_then(|()| file.sync_data())
                .map_err(|e| StoreError::io(&path, e))?;
        }
        let version = match found.records.first() {
            Some(LogRecord::Header { version, .. }) => *version,
            _ => {
                return Err(StoreError::Corrupt {
                    path,
                    line: 1,
                    why: "the log has no header".to_string(),
                });
            }
        };
        let mut session = Session::blank(id, dir, file, hold, shared, version);
        session.len_bytes = found.whole_bytes;
        session.last_digest = found.last_digest;
        session.records.reserve(found.records.len());
        for record in found.records {
            session.note(record);
        }
        session.baseline = session.baseline(session.epoch)?;
        if let Some(turn) = session.open_turn {
            session.end_unfinished(turn)?;
        }
        session.note_in_index();
        Ok(session)
    }

    /// A session with no record yet, its log `file` at `dir`, of format `version`.
    fn blank(
        id: SessionId,
        dir: PathBuf,
        file: File,
        hold: Hold,
        shared: Shared,
        version: u32,
    ) -> Session {
        Session {
            id,
            path: dir.join(LOG_FILE),
            dir,
            file,
            len_bytes: 0,
            records: Vec::new(),
            last_digest: GENESIS_DIGEST.to_string(),
            epoch_start: 0,
            epoch: 0,
            last_turn: 0,
            open_turn: None,
            last_call: 0,
            approvals: Vec::new(),
            inherited: Labels::PUBLIC,
            root_turn: None,
            poisoned: false,
            baseline: None,
            _hold: hold,
            index: shared.index,
            append_times: shared.append_times,
            data_syncs: 0,
            syncs: shared.syncs,
            version,
            unplaced: None,
        }
    }

    /// A new session `id`, whose place is `dir`: its log begun with the header in the
    /// temporary directory `unplaced`, not yet synced. The first synced append makes both
    /// durable and puts the directory in place (`create`); dropped before, it leaves nothing.
    pub(super) fn begin(
        id: SessionId,
        dir: PathBuf,
        unplaced: Unplaced,
        hold: Hold,
        shared: Shared,
    ) -> Result<Session, StoreError> {
        let path = unplaced.tmp().join(LOG_FILE);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| StoreError::io(&path, e))?;
        file.try_lock()
            .map_err(|e| StoreError::io(&path, e.into()))?;
        let mut session = Session::blank(id, dir, file, hold, shared, bxcore::LOG_FORMAT_VERSION);
        session.unplaced = Some(unplaced);
        let header = LogRecord::Header {
            version: bxcore::LOG_FORMAT_VERSION,
            session: session.id.clone(),
            time: Timestamp::now(),
        };
        let (text, digest) = line::encode(&header, 1, GENESIS_DIGEST)
            .map_err(|e| session.bad(&header, e.to_string()))?;
        session
            .file
            .write_all(text.as_bytes())
            .map_err(|e| StoreError::io(&path, e))?;
        session.len_bytes = text.len() as u64;
        session.last_digest = digest;
        session.records.push(header);
        Ok(session)
    }

    /// Appends `record` as one line and waits until it is on disk (`fdatasync`), with any
    /// line [`Session::append_synced_with_next`] left. Returns its sequence number. A record
    /// out of place (a second header, a user record while a turn is open, the end of a turn
    /// that is not open, an epoch out of order) is refused.
    pub fn append(&mut self, record: LogRecord) -> Result<u64, StoreError> {
        self.append_with(record, true)
    }

    /// [`Session::append`], except that the line reaches the disk with the next append's
    /// `fdatasync`, one sync for both (issue 36): for a turn's answer, whose `turn_end`
    /// follows at once (and a child's inherited labels, whose task follows at once). A crash between them can lose the answer with its end, never keep
    /// an end without its answer, and open ends such a turn as `interrupted`, as it ends one
    /// that crashed before its answer; the owner is told a turn ended only once its end is
    /// on disk.
    pub fn append_synced_with_next(&mut self, record: LogRecord) -> Result<u64, StoreError> {
        self.append_with(record, false)
    }

    /// The `fdatasync`s appends have made since this session was opened.
    pub fn data_syncs(&self) -> u64 {
        self.data_syncs
    }

    /// Appends `record`, and syncs the file when `sync` is set.
    fn append_with(&mut self, record: LogRecord, sync: bool) -> Result<u64, StoreError> {
        if self.poisoned {
            return Err(StoreError::Poisoned(self.id.clone()));
        }
        self.check_append(&record)?;
        let seq = self.records.len() as u64 + 1;
        let (text, digest) = line::encode(&record, seq, &self.last_digest)
            .map_err(|e| self.bad(&record, e.to_string()))?;
        let started = Instant::now();
        let written = self.file.write_all(text.as_bytes()).and_then(|()| {
            if sync {
                self.data_syncs += 1;
                self.file.sync_data()
            } else {
                Ok(())
            }
        });
        if let Err(e) = written {
            self.undo_partial_write();
            return Err(StoreError::io(&self.path, e));
        }
        if sync {
            self.syncs.one();
            self.append_times.observe(started.elapsed());
            self.place()?;
        }
        self.len_bytes += text.len() as u64;
        self.last_digest = digest;
        self.note(record);
        self.note_in_index();
        Ok(seq)
    }

    /// A new session's directory put in place once its log is synced (`create`). A failure
    /// refuses every append from now on: the session may be in place or not.
    fn place(&mut self) -> Result<(), StoreError> {
        let Some(unplaced) = &mut self.unplaced else {
            return Ok(());
        };
        if let Err(e) = unplaced.place(&self.dir, &self.id, &self.syncs) {
            self.poisoned = true;
            return Err(e);
        }
        self.unplaced = None;
        Ok(())
    }

    /// Cuts what a failed write may have left, so the next line starts clean.
    fn undo_partial_write(&mut self) {
        if let Err(e) = self
            .file
            .set_len(self.len_bytes)
            .and_then(|()| self.file.sync_data())
        {
            tracing::error!(session = %self.id, error = %e, "cannot undo a failed write; refusing further appends");
            self.poisoned = true;
        }
    }

    fn bad(&self, record: &LogRecord, why: String) -> StoreError {
        StoreError::BadRecord {
            session: self.id.clone(),
            kind: record.kind(),
            why,
        }
    }

    fn check_append(&self, record: &LogRecord) -> Result<(), StoreError> {
        let why = match record {
            LogRecord::Header { .. } => {
                Some("a log has one header, written when it is created".to_string())
            }
            LogRecord::User { turn, .. } => match self.open_turn {
                Some(open) => Some(format!("turn {open} is still open")),
                None if *turn <= self.last_turn => Some(format!(
                    "turn {turn} does not follow turn {}",
                    self.last_turn
                )),
                None => None,
            },
            LogRecord::Undone { .. } if self.open_turn.is_some() => {
                Some("an undo is written between turns, and a turn is open".to_string())
            }
            LogRecord::Overheard { .. } if self.open_turn.is_some() => Some(
                "overheard text comes with a task, before its turn opens, and a turn is open"
                    .to_string(),
            ),
            LogRecord::TurnEnd { turn, .. } if self.open_turn != Some(*turn) => {
                Some(format!("turn {turn} is not open"))
            }
            LogRecord::Baseline { .. } if self.version < baseline::IN_LOG_SINCE_VERSION => {
                Some(format!(
                    "a log of format {} keeps its baselines in files",
                    self.version
                ))
            }
            LogRecord::Baseline { epoch, .. } if *epoch != self.epoch => Some(format!(
                "it is for epoch {epoch} but the session is in epoch {}",
                self.epoch
            )),
            LogRecord::Baseline { epoch, .. } if self.baseline.is_some() => {
                Some(format!("epoch {epoch} has its baseline already"))
            }
            LogRecord::EpochStart { epoch, .. } if *epoch != self.epoch + 1 => Some(format!(
                "epoch {epoch} does not follow epoch {}",
                self.epoch
            )),
            LogRecord::ApprovalRequested { .. } | LogRecord::ApprovalDecided { .. }
                if self.open_turn.is_none() =>
            {
                Some("an approval belongs to a call of an open turn, and no turn is open".into())
            }
            LogRecord::ApprovalDecided { approval, .. } if !self.approvals.contains(approval) => {
                Some(format!("approval {approval} was not asked in this turn"))
            }
            _ => None,
        };
        match why {
            Some(why) => Err(self.bad(record, why)),
            None => Ok(()),
        }
    }

    /// Updates what the records so far say, then keeps `record`.
    fn note(&mut self, record: LogRecord) {
        match &record {
            LogRecord::User { turn, .. } => {
                self.open_turn = Some(*turn);
                self.last_turn = *turn;
                self.approvals.clear();
            }
            LogRecord::TurnEnd { .. } => {
                self.open_turn = None;
                self.approvals.clear();
            }
            LogRecord::ApprovalRequested { approval, .. } => {
                self.approvals.push(approval.clone());
            }
            LogRecord::EpochStart { epoch, .. } => {
                self.epoch = *epoch;
                self.epoch_start = self.records.len();
                self.baseline = None;
            }
            LogRecord::ToolResult { call, .. } => self.last_call = self.last_call.max(call.0),
            LogRecord::Inherited {
                class,
                untrusted,
                root_session,
                root_turn,
                ..
            } => {
                self.inherited = self.inherited.join(Labels::new(*class, *untrusted));
                self.root_turn = Some((root_session.clone(), *root_turn));
            }
            _ => {}
        }
        self.records.push(record);
    }

    /// The store this session belongs to, sharing its holds: a subagent opens its child
    /// there, so the child is held like any session.
    pub fn store(&self) -> super::Store {
        let sessions_dir = self.dir.parent().unwrap_or(&self.dir).to_path_buf();
        let shared = Shared {
            index: self.index.clone(),
            append_times: self.append_times.clone(),
            syncs: self.syncs.clone(),
        };
        super::Store::from_parts(sessions_dir, self._hold.holds().clone(), shared)
    }

    /// About how many bytes of memory it holds: its log's bytes (its records, read) and its
    /// baseline's text. For bounding the sessions kept open between tasks (`engine::idle`).
    pub fn held_bytes(&self) -> u64 {
        let baseline = self.baseline.as_ref().map_or(0, |b| {
            let tools: usize = b
                .tools
                .iter()
                .map(|t| t.name.len() + t.description.len() + value_bytes(&t.parameters))
                .sum();
            b.system.len() + b.memory.len() + tools
        });
        self.len_bytes + baseline as u64
    }

    /// Tells the store's index this session's record count and last turn.
    fn note_in_index(&self) {
        let summary = Summary {
            records: self.records.len() as u64,
            last_turn: self.last_turn,
            open_turn: self.open_turn,
        };
        self.index.note(&self.id, summary);
    }
}

/// About how many bytes `value`'s text takes (its strings and keys, 8 for anything else).
fn value_bytes(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::String(s) => s.len(),
        serde_json::Value::Array(items) => items.iter().map(value_bytes).sum(),
        serde_json::Value::Object(map) => map.iter().map(|(k, v)| k.len() + value_bytes(v)).sum(),
        _ => 8,
    }
}
