//! Append-only JSON-lines files under the state dir (memory notes, notifications): one value
//! a line, each append on disk (fdatasync) before it returns.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The notifications file, in the state dir: what the heartbeat found worth telling, and the
/// approvals that unattended turns wait for (`GET /v1/notifications`).
pub const NOTIFICATIONS_FILE: &str = "notifications.jsonl";

/// Serialises appends within loopd, so lines from two turns never interleave.
static APPENDS: Mutex<()> = Mutex::new(());

/// Why a journal could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A line is not what the file holds.
    #[error("{path} line {line}: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
        /// Why.
        why: String,
    },
}

fn io(path: &Path, source: std::io::Error) -> JournalError {
    JournalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Appends `values` to `path` (created if missing), one JSON line each, durably.
pub fn append<T: Serialize>(path: &Path, values: &[T]) -> Result<(), JournalError> {
    let mut text = String::new();
    for value in values {
        let line = serde_json::to_string(value).map_err(|e| JournalError::Corrupt {
            path: path.to_path_buf(),
            line: 0,
            why: e.to_string(),
        })?;
        text.push_str(&line);
        text.push('\n');
    }
    if text.is_empty() {
        return Ok(());
    }
    // A poisoned lock only means another append panicked; the file is still whole lines.
    let _guard = APPENDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let existed = path.exists();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| io(path, e))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_data())
        .map_err(|e| io(path, e))?;
    if !existed && let Some(dir) = path.parent() {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io(dir, e))?;
    }
    Ok(())
}

/// Every value in `path`, in order; none when the file does not exist. A last line without
/// its newline (a write cut by a crash) is skipped.
pub fn read_all<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, JournalError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(path, e)),
    };
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    whole
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| JournalError::Corrupt {
                path: path.to_path_buf(),
                line: i + 1,
                why: e.to_string(),
            })
        })
        .collect()
}
