//! `<state_dir>/schedules.json`: each schedule's last due time, last run, paused flag and the
//! run in flight (what a restart submits again), replaced atomically (a temporary file, fsync, rename, fsync of the directory), so a
//! loopd killed at any point finds either the state before a write or the one after it.

use bxcore::{SessionId, TaskId, Timestamp};
use proto::api::{RunTrigger, ScheduleRun};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The state file, in the state dir.
pub const SCHEDULES_FILE: &str = "schedules.json";

/// What is kept of one schedule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleState {
    /// The due time of its last run (or skipped run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_due: Option<Timestamp>,
    /// Its last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<ScheduleRun>,
    /// Paused by the owner.
    #[serde(default)]
    pub paused: bool,
    /// The run begun and not yet ended, written down before its task is submitted and taken
    /// out when its end is: the next start submits it again (`docs/schedules.md`). Absent in
    /// files from before issue 33; a run left running there is ended `interrupted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_flight: Option<InFlight>,
}

/// A run in flight: enough to submit its task again as the same task, into the same session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InFlight {
    /// Its task's id (`timing::run_task_id`): the engine runs a task of this id at most once in
    /// its session, so a second submission after a crash is answered from the session's log
    /// when the first one got there.
    pub task_id: TaskId,
    /// Its session: for `session = "new"` the one drawn for it, not a new draw.
    pub session: SessionId,
    /// Whether its session is one of its own (`session = "new"`): submitted again only into a
    /// session that does not exist or holds nothing but this task.
    pub new_session: bool,
    /// When it began, as its `last_run` says (which it updates while that is still the last).
    pub started: Timestamp,
    /// Why it started.
    pub trigger: RunTrigger,
}

/// The whole file: every schedule's state by name (also of schedules no longer configured,
/// so that one taken out and put back keeps its flag).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    /// By name.
    pub schedules: BTreeMap<String, ScheduleState>,
}

/// Why the state could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a schedules state.
    #[error("{path} is not a schedules state: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl StateError {
    /// Whether the disk is full (or the quota spent).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, StateError::Io { source, .. }
            if matches!(source.raw_os_error(), Some(code) if code == nix::libc::ENOSPC || code == nix::libc::EDQUOT))
    }
}

fn io(path: &Path, source: std::io::Error) -> StateError {
    StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The state at `path`; empty when there is no file yet.
pub fn load(path: &Path) -> Result<StateFile, StateError> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| StateError::Corrupt {
            path: path.to_path_buf(),
            why: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile::default()),
        Err(e) => Err(io(path, e)),
    }
}

/// Replaces the state at `path` with `state`, durably.
pub fn save(path: &Path, state: &StateFile) -> Result<(), StateError> {
    let bytes = serde_json::to_vec_pretty(state).map_err(|e| StateError::Corrupt {
        path: path.to_path_buf(),
        why: e.to_string(),
    })?;
    crate::session::replace_file(path, &bytes).map_err(|e| io(path, e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proto::api::RunOutcome;

    #[test]
    fn a_saved_state_reads_back_and_a_missing_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SCHEDULES_FILE);
        assert_eq!(load(&path).unwrap(), StateFile::default());
        let mut state = StateFile::default();
        state.schedules.insert(
            "morning".into(),
            ScheduleState {
                last_due: Some(Timestamp::now()),
                last_run: Some(ScheduleRun {
                    started: Timestamp::now(),
                    trigger: RunTrigger::Due,
                    session: bxcore::SessionId::new("s").unwrap(),
                    turn: Some(3),
                    outcome: RunOutcome::Running,
                }),
                paused: true,
                in_flight: Some(InFlight {
                    task_id: TaskId::new("s1767265200000-morning").unwrap(),
                    session: bxcore::SessionId::new("s").unwrap(),
                    new_session: false,
                    started: Timestamp::now(),
                    trigger: RunTrigger::Due,
                }),
            },
        );
        save(&path, &state).unwrap();
        save(&path, &state).unwrap();
        assert_eq!(load(&path).unwrap(), state);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file left");
        std::fs::write(&path, "{").unwrap();
        assert!(matches!(load(&path), Err(StateError::Corrupt { .. })));
    }

    #[test]
    fn a_state_written_before_runs_were_kept_in_flight_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SCHEDULES_FILE);
        std::fs::write(
            &path,
            r#"{"schedules": {"m": {"last_due": "2026-01-01T11:00:00Z", "paused": false}}}"#,
        )
        .unwrap();
        let read = load(&path).unwrap();
        assert_eq!(read.schedules["m"].in_flight, None);
    }
}
