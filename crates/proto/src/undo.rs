//! Undo and diff of what a session's turns wrote: brokerd's `POST /v1/undo` and
//! `GET /v1/diff`, and loopd's `POST /v1/sessions/{id}/undo` and `GET /v1/sessions/{id}/diff`
//! that reach them; and loopd's `POST /v1/sessions/{id}/fork` (`docs/undo.md`).

use bxcore::SessionId;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// brokerd's `POST /v1/undo`: put back every file the session's turns from `from_turn` on
/// changed, or, with `dry_run`, only say which.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UndoRequest {
    /// The session.
    pub session: SessionId,
    /// The first turn undone; every later one is too.
    pub from_turn: u64,
    /// List what would be put back, and change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// loopd's `POST /v1/sessions/{id}/undo`: undo the session's last `turns` turns that are not
/// undone yet, or every turn from `from_turn` on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UndoTurns {
    /// How many of the last turns not undone yet (at least 1), when `from_turn` is absent: a
    /// second undo of one turn undoes the turn before the first's.
    #[serde(default)]
    pub turns: u64,
    /// Every turn from this one on instead (the web console's "undo from here").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_turn: Option<u64>,
    /// List what would change, and change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// One file an undo puts back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutBack {
    /// The file.
    pub path: PathBuf,
    /// The turn whose write is undone.
    pub turn: u64,
    /// True: removed (the turn made it); false: its content from before the turn.
    pub removed: bool,
}

/// What an undo did (or, dry, would do).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UndoAnswer {
    /// The session.
    pub session: SessionId,
    /// The turns undone, first to last.
    pub turns: Vec<u64>,
    /// The files, in the order they are put back (newest write first).
    pub files: Vec<PutBack>,
    /// Nothing was changed.
    pub dry_run: bool,
}

/// What one write of a turn changed, as a unified diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileDiff {
    /// The file.
    pub path: PathBuf,
    /// The turn that wrote it.
    pub turn: u64,
    /// The diff (`--- a/PATH`, `+++ b/PATH`, hunks); for content that is not UTF-8, a line
    /// saying so with both sizes.
    pub diff: String,
}

/// What a session's turns wrote, as diffs (`GET /v1/diff?session=ID[&turn=N]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffAnswer {
    /// The session.
    pub session: SessionId,
    /// One per write still kept, oldest first.
    pub files: Vec<FileDiff>,
}

/// loopd's `POST /v1/sessions/{id}/fork`: a new session whose log starts as a copy of this
/// one's up to the end of turn `at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkRequest {
    /// The last turn copied; absent: the last turn that ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<u64>,
    /// The new session's id; absent: loopd names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_session: Option<SessionId>,
}

/// A fork made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkAnswer {
    /// The new session.
    pub session: SessionId,
    /// The session it was forked from.
    pub from: SessionId,
    /// The last turn copied.
    pub at: u64,
    /// How many records were copied (the header not counted).
    pub records: u64,
    /// Whether the new session got a copy of the source's KV file, so that its first turn
    /// evaluates only its new tokens.
    #[serde(default)]
    pub kv_copied: bool,
}
