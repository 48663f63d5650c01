//! The heartbeat (SPEC 5), a schedule like any other (`docs/schedules.md`): `[heartbeat]
//! every` becomes the schedule `heartbeat`, a turn on the `heartbeat` session with
//! `heartbeat.md` (read each run from the system prompt's directory) as the task. An answer of
//! exactly `HEARTBEAT_OK` (`config::QUIET_REPLY`) is quiet; anything else is kept as a notification in
//! `<state_dir>/notifications.jsonl`, labelled with the turn's context label at its end. The
//! scheduler (`schedule`) runs it.

use crate::config::{Config, Schedule};
use crate::journal::{self, JournalError};
use proto::api::Notification;
use std::path::PathBuf;

/// The notifications file, in the state dir.
pub use crate::journal::NOTIFICATIONS_FILE;

/// The notifications file of `cfg`.
pub fn path(cfg: &Config) -> PathBuf {
    cfg.state_dir.join(NOTIFICATIONS_FILE)
}

/// Every notification, oldest first.
pub fn list(cfg: &Config) -> Result<Vec<Notification>, JournalError> {
    journal::read_all(&path(cfg))
}

/// The heartbeat's schedule; `Ok(None)` when the heartbeat is off.
pub fn schedule(cfg: &Config) -> Result<Option<Schedule>, String> {
    cfg.heartbeat_schedule()
}
