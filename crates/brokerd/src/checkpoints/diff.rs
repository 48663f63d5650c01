//! What a session's turns wrote, as unified diffs of each write's content before and after
//! (both kept as blobs), for `boxctl diff`.

use super::{Checkpoints, Record};
use bxcore::SessionId;
use proto::FileDiff;
use similar::TextDiff;

/// Lines of context around each change.
pub const CONTEXT_LINES: usize = 3;

/// The diffs of `session`'s writes still kept, oldest first; only turn `turn`'s when given.
pub fn diffs(store: &Checkpoints, session: &SessionId, turn: Option<u64>) -> Vec<FileDiff> {
    store
        .records(session)
        .iter()
        .filter(|r| turn.is_none_or(|t| r.turn == t))
        .map(|record| FileDiff {
            path: record.path(),
            turn: record.turn,
            diff: diff_of(store, record),
        })
        .collect()
}

/// The unified diff of one write; a line saying what is missing or not text instead.
fn diff_of(store: &Checkpoints, record: &Record) -> String {
    let before = match &record.before {
        Some(before) => store.blob(&before.sha256),
        None => Some(Vec::new()),
    };
    let after = match record.left() {
        Some(sha256) => store.blob(sha256),
        None => Some(Vec::new()),
    };
    let (Some(before), Some(after)) = (before, after) else {
        return "(the content of this write is no longer kept)\n".to_owned();
    };
    let (Ok(old), Ok(new)) = (String::from_utf8(before), String::from_utf8(after)) else {
        return format!(
            "(not text: {} bytes before, {} bytes after)\n",
            record.before.as_ref().map_or(0, |b| b.bytes),
            record.after_bytes
        );
    };
    let path = record.path().display().to_string();
    let old_name = if record.before.is_some() {
        format!("a{path}")
    } else {
        "/dev/null".to_owned()
    };
    let new_name = if record.removed {
        "/dev/null".to_owned()
    } else {
        format!("b{path}")
    };
    TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(CONTEXT_LINES)
        .header(&old_name, &new_name)
        .to_string()
}
