//! `[heartbeat]`: how often loopd runs a turn on the `heartbeat` session.

use super::schedules::{DEFAULT_TIMEZONE, HEARTBEAT_SCHEDULE, Missed, Notify, Schedule};
use bxconfig::Problems;
use proto::api::reserved::HEARTBEAT_SESSION;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// The prompt file of a beat, beside the system prompt.
pub const HEARTBEAT_PROMPT_FILE: &str = "heartbeat.md";
/// The answer that means "nothing needs the owner's attention".
pub const QUIET_REPLY: &str = "HEARTBEAT_OK";

/// What `every` says for no heartbeat.
pub const HEARTBEAT_OFF: &str = "off";
/// The shortest interval between beats, in milliseconds.
pub const HEARTBEAT_MIN_MS: u64 = 10;

/// `[heartbeat]`: a turn on the `heartbeat` session every interval, with `heartbeat.md` (beside
/// the system prompt) as the user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Heartbeat {
    /// The interval between beats, as a humantime string (`"30m"`, `"1h 30m"`); `"off"` (the
    /// default) or empty: no heartbeat.
    pub every: String,
}

impl Default for Heartbeat {
    fn default() -> Heartbeat {
        Heartbeat {
            every: HEARTBEAT_OFF.into(),
        }
    }
}

impl Heartbeat {
    /// The interval between beats; `Ok(None)` when the heartbeat is off.
    pub fn interval(&self) -> Result<Option<Duration>, String> {
        let every = self.every.trim();
        if every.is_empty() || every.eq_ignore_ascii_case(HEARTBEAT_OFF) {
            return Ok(None);
        }
        let interval = humantime::parse_duration(every)
            .map_err(|e| format!("{every:?} is not a duration like \"30m\" or \"off\": {e}"))?;
        if interval < Duration::from_millis(HEARTBEAT_MIN_MS) {
            return Err(format!(
                "{every:?} is shorter than {HEARTBEAT_MIN_MS} ms; use \"off\" for no heartbeat"
            ));
        }
        super::schedules::not_too_long(every, interval)?;
        Ok(Some(interval))
    }

    /// The heartbeat as the schedule `heartbeat` (`docs/schedules.md`), its prompt file beside
    /// `system` (the system prompt); `Ok(None)` when the heartbeat is off.
    pub fn schedule(&self, system: &Path) -> Result<Option<Schedule>, String> {
        if self.interval()?.is_none() {
            return Ok(None);
        }
        let dir = system.parent().unwrap_or(Path::new("."));
        Ok(Some(Schedule {
            name: HEARTBEAT_SCHEDULE.into(),
            cron: None,
            every: Some(self.every.trim().to_string()),
            timezone: DEFAULT_TIMEZONE.into(),
            task: None,
            task_file: Some(dir.join(HEARTBEAT_PROMPT_FILE)),
            session: HEARTBEAT_SESSION.into(),
            missed: Missed::Skip,
            quiet_reply: Some(QUIET_REPLY.into()),
            notify: Notify::UnlessQuiet,
            notify_to: None,
            enabled: true,
        }))
    }

    pub(super) fn check(&self, p: &mut Problems) {
        if let Err(why) = self.interval() {
            p.push("heartbeat.every", why);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn every(text: &str) -> Result<Option<Duration>, String> {
        Heartbeat { every: text.into() }.interval()
    }

    #[test]
    fn every_parses_humantime_and_off() {
        assert_eq!(every("30m"), Ok(Some(Duration::from_secs(1_800))));
        assert_eq!(every("50ms"), Ok(Some(Duration::from_millis(50))));
        assert_eq!(every("off"), Ok(None));
        assert_eq!(every(""), Ok(None));
        assert_eq!(Heartbeat::default().interval(), Ok(None));
        assert!(every("soon").unwrap_err().contains("not a duration"));
        assert!(every("1ms").unwrap_err().contains("shorter"));
    }
}
