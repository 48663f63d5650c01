//! The heartbeat (SPEC 5), a schedule like any other (`docs/schedules.md`): `[heartbeat]
//! every` becomes the schedule `heartbeat`, a turn on the `heartbeat` session with
//! `heartbeat.md` (read each run from the system prompt's directory) as the task. An answer of
//! exactly [`QUIET_REPLY`] is quiet; anything else is kept as a notification in
//! `<state_dir>/notifications.jsonl`, labelled with the turn's context label at its end. The
//! scheduler (`schedule`) runs it.

use crate::config::{Config, HEARTBEAT_SCHEDULE, Missed, Notify, Schedule};
use crate::journal::{self, JournalError};
use proto::api::Notification;
use std::path::{Path, PathBuf};

/// The session heartbeat turns run in (reserved: clients cannot use it).
pub use proto::api::reserved::HEARTBEAT_SESSION;
/// The prompt file of a beat, beside the system prompt.
pub const HEARTBEAT_PROMPT_FILE: &str = "heartbeat.md";
/// The answer that means "nothing needs the owner's attention".
pub const QUIET_REPLY: &str = "HEARTBEAT_OK";
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
    if cfg.heartbeat.interval()?.is_none() {
        return Ok(None);
    }
    let dir = cfg.baseline.system.parent().unwrap_or(Path::new("."));
    Ok(Some(Schedule {
        name: HEARTBEAT_SCHEDULE.into(),
        cron: None,
        every: Some(cfg.heartbeat.every.trim().to_string()),
        timezone: crate::config::DEFAULT_TIMEZONE.into(),
        task: None,
        task_file: Some(dir.join(HEARTBEAT_PROMPT_FILE)),
        session: HEARTBEAT_SESSION.into(),
        missed: Missed::Skip,
        quiet_reply: Some(QUIET_REPLY.into()),
        notify: Notify::UnlessQuiet,
        enabled: true,
    }))
}
