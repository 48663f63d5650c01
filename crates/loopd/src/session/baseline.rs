//! The baseline of an epoch: the fixed prefix of every prompt in it.
//!
//! It is written once, when the epoch starts, and never changes, so the prompt prefix stays
//! byte-identical for the whole epoch and llama-server's prompt cache is reused turn after
//! turn.

use super::StoreError;
use super::fsync::{sync_dir, write_new_file};
use bxcore::{Labels, Timestamp};
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

/// Writes `baseline` once; refuses if its file exists. The file appears whole or not at all.
pub fn write(dir: &Path, baseline: &Baseline) -> Result<(), StoreError> {
    let target = path(dir, baseline.epoch);
    let text = serde_json::to_vec_pretty(baseline).map_err(|e| {
        StoreError::io(
            &target,
            std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        )
    })?;
    match write_new_file(&target, &text) {
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
    sync_dir(dir)
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
