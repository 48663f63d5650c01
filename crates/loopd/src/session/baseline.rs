//! The baseline of an epoch: the fixed prefix of every prompt in it.
//!
//! It is written once, when the epoch starts, and never changes, so the prompt prefix stays
//! byte-identical for the whole epoch and llama-server's prompt cache is reused turn after
//! turn.

use super::StoreError;
use super::fsync::{Syncs, sync_dir, write_new_file};
use bxcore::{Labels, LogRecord, Timestamp};
use proto::ToolSchema;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The format version of baseline files.
pub const BASELINE_FORMAT_VERSION: u32 = 1;

/// What every prompt of an epoch starts with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Baseline {
    /// [`BASELINE_FORMAT_VERSION`] when written.
    pub version: u32,
    /// The epoch it belongs to.
    pub epoch: u32,
    /// When it was written.
    pub time: Timestamp,
    /// The system prompt, as sent.
    pub system: String,
    /// The memory notes included at the epoch's start, as sent (empty for none).
    pub memory: String,
    /// The label of that memory: part of the session's context label for the epoch.
    pub memory_labels: Labels,
    /// The tools array, in the order sent.
    pub tools: Vec<ToolSchema>,
    /// The join of the labels of the tools array's text: an external tool's description is
    /// its author's words (an MCP server's), read by the model in every call of the epoch.
    /// Part of the session's context label for the epoch. (Absent in baselines written before
    /// it existed, which count as public.)
    #[serde(default)]
    pub tools_labels: Labels,
}

/// The path of epoch `epoch`'s baseline in session directory `dir`.
pub fn path(dir: &Path, epoch: u32) -> PathBuf {
    dir.join(format!("baseline-{epoch}.json"))
}

/// The first log format version that keeps baselines in the log (`LogRecord::Baseline`)
/// instead of files: a session whose header says an older one goes on writing files.
pub const IN_LOG_SINCE_VERSION: u32 = 2;

/// Writes `baseline` to its file (logs older than [`IN_LOG_SINCE_VERSION`]) once; refuses if
/// its file exists. The file appears whole or not at all.
pub fn write(dir: &Path, baseline: &Baseline, syncs: &Syncs) -> Result<(), StoreError> {
    let target = path(dir, baseline.epoch);
    let text = serde_json::to_vec_pretty(baseline).map_err(|e| {
        StoreError::io(
            &target,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    match write_new_file(&target, &text, syncs) {
        Err(StoreError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists =>
        {
            Err(StoreError::BaselineExists {
                path: target,
                epoch: baseline.epoch,
            })
        }
        other => other,
    }?;
    sync_dir(dir, syncs)
}

/// The baseline of epoch `epoch` in `records` (a log's, from format
/// [`IN_LOG_SINCE_VERSION`] on), the first of them line `first_line` of `path`: its
/// `Baseline` record, read back. A body that is not a baseline is an error naming the line.
pub fn in_log(
    path: &Path,
    records: &[LogRecord],
    first_line: usize,
    epoch: u32,
) -> Result<Option<Baseline>, StoreError> {
    let found = records.iter().enumerate().find_map(|(at, r)| match r {
        LogRecord::Baseline { epoch: e, baseline } if *e == epoch => Some((at, baseline)),
        _ => None,
    });
    let Some((at, body)) = found else {
        return Ok(None);
    };
    let corrupt = |why: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        line: (first_line + at) as u64,
        why,
    };
    let baseline =
        Baseline::deserialize(body).map_err(|e| corrupt(format!("not a baseline: {e}")))?;
    if baseline.epoch != epoch {
        return Err(corrupt(format!(
            "the baseline of epoch {epoch} holds epoch {}",
            baseline.epoch
        )));
    }
    Ok(Some(baseline))
}

/// Reads epoch `epoch`'s baseline, if it was written.
pub fn read(dir: &Path, epoch: u32) -> Result<Option<Baseline>, StoreError> {
    let target = path(dir, epoch);
    let text = match std::fs::read(&target) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(&target, e)),
    };
    let baseline: Baseline = serde_json::from_slice(&text).map_err(|e| StoreError::Corrupt {
        path: target.clone(),
        line: e.line() as u64,
        why: format!("not a baseline: {e}"),
    })?;
    if baseline.epoch != epoch {
        return Err(StoreError::Corrupt {
            path: target,
            line: 1,
            why: format!("holds epoch {} instead of {epoch}", baseline.epoch),
        });
    }
    Ok(Some(baseline))
}
