//! What an open session's log says: its records, epoch, carry, turns and labels, read from
//! what the log holds in memory (nothing here touches the disk).

use super::Session;
use bxcore::{CallId, Labels, LogRecord, SessionId, Usage};
use std::path::Path;

impl Session {
    /// The labels this session inherited from the session that started it (public and
    /// trusted for a session nobody started): part of its context label in every epoch.
    pub fn inherited(&self) -> Labels {
        self.inherited
    }

    /// The top-level session and turn this session's tool calls count against for per-turn
    /// limits, when another session started it.
    pub fn root_turn(&self) -> Option<(&SessionId, u64)> {
        self.root_turn
            .as_ref()
            .map(|(session, turn)| (session, *turn))
    }

    /// The session's id.
    pub fn id(&self) -> &SessionId {
        &self.id
    }

    /// The session's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every record, header first.
    pub fn records(&self) -> &[LogRecord] {
        &self.records
    }

    /// The records of the current epoch, from its `EpochStart` (or the header) on.
    pub fn epoch_records(&self) -> &[LogRecord] {
        &self.records[self.epoch_start..]
    }

    /// The current epoch's number; 0 until the first compaction.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// The carry of the current epoch and its labels, if it is not epoch 0.
    pub fn carry(&self) -> Option<(&str, Labels)> {
        match self.records.get(self.epoch_start) {
            Some(LogRecord::EpochStart {
                carry,
                class,
                untrusted,
                ..
            }) => Some((carry.as_str(), Labels::new(*class, *untrusted))),
            _ => None,
        }
    }

    /// Whether a write failed: the session refuses every append until it is opened again.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// The highest turn number so far (0 for none).
    pub fn last_turn(&self) -> u64 {
        self.last_turn
    }

    /// The turn that has started and not ended, if any.
    pub fn open_turn(&self) -> Option<u64> {
        self.open_turn
    }

    /// The next tool call's number.
    pub fn next_call(&self) -> CallId {
        CallId(self.last_call + 1)
    }

    /// The usage of the last model answer in the current epoch.
    pub fn last_usage(&self) -> Option<Usage> {
        self.epoch_records().iter().rev().find_map(|r| match r {
            LogRecord::Assistant { usage, .. } => *usage,
            _ => None,
        })
    }
}
