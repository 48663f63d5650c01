//! Checkpoints: what each `write_file` of a session's turn changed, and each `exec` under
//! `rw_paths` (through an overlay, [`layers`], or by snapshots, [`runs`]), so that the owner can undo a turn (`docs/undo.md`). Kept under
//! `<state_dir>/checkpoints/`, as private as the audit log (directory 0700, files 0600):
//! - `index.jsonl`: one line per change of a record's state (a record written whole each time;
//!   the last line of a record's `seq` is what holds);
//! - `blobs/<sha256>`: the content before and after each write, by digest (one copy of each).
//!
//! **Crash points.** A write is recorded `pending`, with its blobs on disk and the name of its
//! temporary file, before that file is made, and `done` after the rename. A kill -9 in between leaves a pending record: at the
//! next start it is `done` when the file holds what the write wrote, and dropped otherwise (the
//! old file is there, and nothing of the write); its temporary file, when one is left, is
//! removed. So there is never a new file without its
//! record, nor a record of a write that did not happen.
//!
//! **Bounds.** `[checkpoints] max_bytes` over the blobs and `keep_turns` per session: past them,
//! the oldest records go first, and [`Checkpoints::dropped`] counts them for the status.

mod apply;
pub mod diff;
mod files;
pub mod layers;
#[cfg(test)]
mod layers_tests;
pub mod runs;
mod settle;
mod store;
pub mod tree;
pub mod upper;
pub mod ways;

use bxcore::{DataClass, SessionId, Timestamp};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::sync::Arc;

pub use store::{Checkpoints, NewWrite, Pending};

/// The directory under brokerd's state dir.
pub const DIR: &str = "checkpoints";

/// `[checkpoints]` of brokerd's config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointSettings {
    /// Whether writes are recorded at all.
    pub enabled: bool,
    /// The most bytes of content kept (before and after each write, each distinct content
    /// once); past it the oldest records go first.
    pub max_bytes: u64,
    /// The most turns of one session whose writes are kept; past it its oldest turn goes.
    pub keep_turns: u64,
}

impl Default for CheckpointSettings {
    fn default() -> CheckpointSettings {
        CheckpointSettings {
            enabled: true,
            max_bytes: 64 * 1024 * 1024,
            keep_turns: 20,
        }
    }
}

/// Where a record stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Recorded before the new file is put in place.
    Pending,
    /// The file is in place.
    Done,
    /// Undone: the file is back as it was before.
    Undone,
    /// Dropped: the write failed, or a crash left it unmade, or the bounds removed it.
    Dropped,
}

/// What was at the path before a write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Before {
    /// The digest of its content (its blob's name).
    pub sha256: String,
    /// Its size.
    pub bytes: u64,
    /// Its permission bits.
    pub mode: u32,
}

/// One write: where, in which session's turn, and what it replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Its number, in the order of the writes.
    pub seq: u64,
    /// Where it stands.
    pub state: State,
    /// When it was recorded.
    pub time: Timestamp,
    /// The session whose call wrote.
    pub session: SessionId,
    /// The turn of that session.
    pub turn: u64,
    /// The call's number in the session.
    pub call: u64,
    /// The grant's root the file is beneath (canonical).
    pub root: PathBuf,
    /// The file beneath the root.
    pub rel: PathBuf,
    /// What was there; none: no file.
    pub before: Option<Before>,
    /// The digest of what the write wrote (empty when it removed the file).
    pub after_sha256: String,
    /// Its size.
    pub after_bytes: u64,
    /// Whether the change removed the file (an exec's run did).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
    /// While pending: the temporary file beside the target that the write fills first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp: Option<String>,
    /// The class of the grant's results: what the content is labelled.
    pub class: DataClass,
}

impl Record {
    /// The file's absolute path.
    pub fn path(&self) -> PathBuf {
        self.root.join(&self.rel)
    }

    /// The blobs it holds.
    pub fn blobs(&self) -> impl Iterator<Item = &str> {
        self.before
            .iter()
            .map(|b| b.sha256.as_str())
            .chain(self.left())
    }

    /// The digest of what the change left at the path; none when it removed the file.
    pub fn left(&self) -> Option<&str> {
        (!self.removed).then_some(self.after_sha256.as_str())
    }
}

/// Whose call a write is, and the store it is recorded in.
#[derive(Debug, Clone)]
pub struct Recorder {
    /// The store.
    pub store: Arc<Checkpoints>,
    /// The calling session.
    pub session: SessionId,
    /// Its turn.
    pub turn: u64,
    /// The call's number in the session.
    pub call: u64,
}

/// The sha256 of `bytes`, as hex.
pub fn digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Why the store cannot do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// Its files could not be read or written.
    #[error("checkpoints: {what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The index holds a line that is not a record.
    #[error("checkpoints: {path} line {line}: {why}")]
    Corrupt {
        /// The index.
        path: PathBuf,
        /// Its line (from 1).
        line: usize,
        /// Why.
        why: String,
    },
}
