//! `[[schedules]]`: tasks loopd runs by itself at set times (`docs/schedules.md`). Every key is
//! kept as written and checked by key (`schedules[2].cron`), so a bad expression, interval or
//! time zone is named where it is; [`Schedule::timing`] gives the parsed form the scheduler
//! runs by.

use crate::zone::Zone;
use bxconfig::Problems;
use bxcore::SessionId;
use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// What `session` says for a fresh session per run (`<name>-<YYYYMMDDTHHMMSSZ>`).
pub const NEW_SESSION: &str = "new";
/// The time zone a cron expression is read in when none is given.
pub const DEFAULT_TIMEZONE: &str = "UTC";
/// The longest schedule name, in bytes: a `new` session's id is the name and a time stamp.
pub const MAX_SCHEDULE_NAME_BYTES: usize = 32;
/// The shortest `every`, in milliseconds: shorter would be a busy loop of turns.
pub const MIN_EVERY_MS: u64 = 10;
/// The longest `every`, in days (100 years): a longer one would never run in the appliance's
/// life, and one far longer (`300000years`) no due time can even be computed for.
pub const MAX_EVERY_DAYS: u64 = 36_525;
/// How many run times `--check-config` shows of each enabled schedule.
pub const CHECK_RUN_TIMES: usize = 3;
/// The name the heartbeat's schedule has: a `[[schedules]]` entry may not take it.
pub const HEARTBEAT_SCHEDULE: &str = "heartbeat";

/// What to do at start about runs that fell due while loopd was down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Missed {
    /// None runs: the last due time moves to the latest missed one.
    #[default]
    Skip,
    /// One catch-up run, however many were missed.
    RunOnce,
}

/// When a run's answer becomes a notification.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Notify {
    /// Every answer.
    Always,
    /// Every answer but the quiet reply (of a turn that ended `done`).
    #[default]
    UnlessQuiet,
    /// None.
    Never,
}

/// One `[[schedules]]` entry, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Unique; 1 to [`MAX_SCHEDULE_NAME_BYTES`] bytes of `A-Z a-z 0-9 . _ -`.
    pub name: String,
    /// A five-field cron expression (minute hour day-of-month month day-of-week).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// A humantime interval (`30m`); exactly one of `cron` and `every`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<String>,
    /// The IANA time zone the cron expression is read in.
    #[serde(default = "default_timezone")]
    pub timezone: String,
    /// The task's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Or a file the task's text is read from at each run; exactly one of `task` and
    /// `task_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_file: Option<PathBuf>,
    /// A fixed session id, or [`NEW_SESSION`].
    #[serde(default = "default_session")]
    pub session: String,
    /// What to do at start about runs missed while loopd was down.
    #[serde(default)]
    pub missed: Missed,
    /// An answer equal to it (trimmed) is quiet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quiet_reply: Option<String>,
    /// When an answer becomes a notification.
    #[serde(default)]
    pub notify: Notify,
    /// Where a channel should send its notifications (`CHANNEL:TARGET`, as
    /// `matrix:!room:example.org`); loopd only carries it ([`check_notify_to`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notify_to: Option<String>,
    /// A disabled schedule never runs by itself (`boxctl schedule run` still runs it).
    #[serde(default = "default_enabled")]
    pub enabled: bool,
}

fn default_timezone() -> String {
    DEFAULT_TIMEZONE.into()
}

fn default_session() -> String {
    NEW_SESSION.into()
}

fn default_enabled() -> bool {
    true
}

/// When a schedule runs, parsed.
#[derive(Debug, Clone)]
pub enum Timing {
    /// At the times a cron expression matches, read in a time zone.
    Cron {
        /// The expression.
        cron: Box<Cron>,
        /// The zone.
        tz: Zone,
    },
    /// Every interval after the previous due time.
    Every(Duration),
}

impl Timing {
    /// The first due time strictly after `t`; `None` when there is none (a cron expression
    /// that never matches again).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Timing::Cron { cron, tz } => cron
                .find_next_occurrence(&t.with_timezone(tz), false)
                .ok()
                .map(|next| next.with_timezone(&Utc)),
            Timing::Every(every) => chrono::Duration::from_std(*every)
                .ok()
                .and_then(|every| t.checked_add_signed(every)),
        }
    }
}

/// Where a schedule's task comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskSource {
    /// The text itself.
    Text(String),
    /// A file read at each run.
    File(PathBuf),
}

impl Schedule {
    /// The parsed timing, or why it cannot be: `(key, why)`.
    pub fn timing(&self) -> Result<Timing, (&'static str, String)> {
        match (&self.cron, &self.every) {
            (Some(cron), None) => {
                let tz = parse_timezone(&self.timezone).map_err(|why| ("timezone", why))?;
                let cron = parse_cron(cron).map_err(|why| ("cron", why))?;
                Ok(Timing::Cron {
                    cron: Box::new(cron),
                    tz,
                })
            }
            (None, Some(every)) => parse_every(every)
                .map(Timing::Every)
                .map_err(|why| ("every", why)),
            (Some(_), Some(_)) => Err(("cron", "give either cron or every, not both".into())),
            (None, None) => Err((
                "cron",
                "give cron (\"0 7 * * *\") or every (\"30m\")".into(),
            )),
        }
    }

    /// The task's source.
    pub fn task_source(&self) -> Option<TaskSource> {
        match (&self.task, &self.task_file) {
            (Some(text), None) => Some(TaskSource::Text(text.clone())),
            (None, Some(file)) => Some(TaskSource::File(file.clone())),
            _ => None,
        }
    }

    /// The fixed session its runs go to; `None` for a fresh session per run.
    pub fn fixed_session(&self) -> Option<&str> {
        (self.session != NEW_SESSION).then_some(self.session.as_str())
    }

    /// `timing` as `boxctl schedules` shows it: `cron 0 7 * * *` or `every 30m`.
    pub fn timing_text(&self) -> String {
        match (&self.cron, &self.every) {
            (Some(cron), _) => format!("cron {cron}"),
            (None, Some(every)) => format!("every {every}"),
            (None, None) => String::new(),
        }
    }

    fn check(&self, key: &str, p: &mut Problems) {
        if let Err(why) = check_name(&self.name) {
            p.push(format!("{key}.name"), why);
        }
        if let Some(Err(why)) = self.notify_to.as_deref().map(check_notify_to) {
            p.push(format!("{key}.notify_to"), why);
        }
        if let Err(why) = parse_timezone(&self.timezone) {
            p.push(format!("{key}.timezone"), why);
        }
        match self.timing() {
            // Said just above.
            Ok(_) | Err(("timezone", _)) => {}
            Err((field, why)) => p.push(format!("{key}.{field}"), why),
        }
        match (&self.task, &self.task_file) {
            (Some(_), Some(_)) => p.push(
                format!("{key}.task"),
                "give either task or task_file, not both",
            ),
            (None, None) => p.push(format!("{key}.task"), "give task (text) or task_file"),
            (Some(text), None) if text.trim().is_empty() => {
                p.push(format!("{key}.task"), "is empty: say what the task is")
            }
            (None, Some(file)) => p.absolute_path(&format!("{key}.task_file"), file),
            _ => {}
        }
        if let Some(session) = self.fixed_session()
            && let Err(why) = check_session(session)
        {
            p.push(format!("{key}.session"), why);
        }
    }
}

/// Checks every entry, and that their names are unique and none is the heartbeat's.
pub(super) fn check(schedules: &[Schedule], p: &mut Problems) {
    for (i, schedule) in schedules.iter().enumerate() {
        let key = format!("schedules[{i}]");
        schedule.check(&key, p);
        if schedule.name == HEARTBEAT_SCHEDULE {
            p.push(
                format!("{key}.name"),
                "\"heartbeat\" is the heartbeat's schedule: set [heartbeat] every, or pick \
                 another name",
            );
        }
        // `session = "new"` runs in `<name>-<time>`: a name that makes that a subagent's id
        // would get the grants meant for subagents.
        if format!("{}-", schedule.name).starts_with(proto::api::reserved::CHILD_PREFIX) {
            p.push(
                format!("{key}.name"),
                format!(
                    "{:?} would name its sessions {:?}..., which are subagents' ids: pick a \
                     name that does not start with \"sub-\"",
                    schedule.name,
                    format!("{}-", schedule.name)
                ),
            );
        }
        if let Some(first) = schedules[..i].iter().position(|s| s.name == schedule.name) {
            p.push(
                format!("{key}.name"),
                format!(
                    "{:?} is already the name of schedules[{first}]: names are unique",
                    schedule.name
                ),
            );
        }
    }
}

/// The next [`CHECK_RUN_TIMES`] run times of every enabled schedule after `now`, one line
/// each, for `--check-config`.
pub(super) fn notes(schedules: &[Schedule], now: DateTime<Utc>) -> Vec<String> {
    let mut notes = Vec::new();
    for schedule in schedules.iter().filter(|s| s.enabled) {
        let Ok(timing) = schedule.timing() else {
            continue;
        };
        let mut times = Vec::new();
        let mut t = now;
        while times.len() < CHECK_RUN_TIMES {
            let Some(next) = timing.next_after(t) else {
                break;
            };
            times.push(match &timing {
                Timing::Cron { tz, .. } => next.with_timezone(tz).to_rfc3339(),
                Timing::Every(_) => next.to_rfc3339(),
            });
            t = next;
        }
        let from = match timing {
            Timing::Every(_) => " (if loopd started now)",
            Timing::Cron { .. } => "",
        };
        notes.push(format!(
            "schedule {} ({}) runs next{from}: {}",
            schedule.name,
            schedule.timing_text(),
            if times.is_empty() {
                "never".to_string()
            } else {
                times.join(", ")
            }
        ));
    }
    notes
}

fn check_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_SCHEDULE_NAME_BYTES || !name.chars().all(allowed) {
        return Err(format!(
            "{name:?} is not a schedule name: 1 to {MAX_SCHEDULE_NAME_BYTES} bytes of A-Z a-z \
             0-9 . _ -"
        ));
    }
    Ok(())
}

fn check_session(session: &str) -> Result<(), String> {
    let id = SessionId::new(session).map_err(|e| format!("{session:?}: {e}"))?;
    match proto::api::reserved::reason(&id) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// A five-field cron expression (no seconds, no year).
pub fn parse_cron(text: &str) -> Result<Cron, String> {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|e| {
            format!(
                "{text:?} is not a five-field cron expression (minute hour day-of-month month \
                 day-of-week): {e}"
            )
        })
}

/// An IANA time zone name, read from the system's time-zone database ([`Zone::named`]).
pub fn parse_timezone(text: &str) -> Result<Zone, String> {
    Zone::named(text)
}

/// The longest `notify_to`, in bytes.
pub const MAX_NOTIFY_TO_BYTES: usize = 256;

/// Whether `to` can be a `notify_to`: `CHANNEL:TARGET`, the channel a lowercase word, the
/// target not empty, no whitespace or control characters, at most [`MAX_NOTIFY_TO_BYTES`].
pub fn check_notify_to(to: &str) -> Result<(), String> {
    let shape = "is not CHANNEL:TARGET, like \"matrix:!room:example.org\"";
    let Some((channel, target)) = to.split_once(':') else {
        return Err(format!("{to:?} {shape}"));
    };
    let channel_ok = !channel.is_empty() && channel.chars().all(|c| c.is_ascii_lowercase());
    let target_ok =
        !target.is_empty() && !target.chars().any(|c| c.is_whitespace() || c.is_control());
    if !channel_ok || !target_ok || to.len() > MAX_NOTIFY_TO_BYTES {
        return Err(format!(
            "{to:?} {shape} (at most {MAX_NOTIFY_TO_BYTES} bytes)"
        ));
    }
    Ok(())
}

/// A humantime interval, at least [`MIN_EVERY_MS`].
pub fn parse_every(text: &str) -> Result<Duration, String> {
    let every = humantime::parse_duration(text.trim())
        .map_err(|e| format!("{text:?} is not a duration like \"30m\": {e}"))?;
    if every < Duration::from_millis(MIN_EVERY_MS) {
        return Err(format!("{text:?} is shorter than {MIN_EVERY_MS} ms"));
    }
    not_too_long(text, every)?;
    Ok(every)
}

/// Refuses an interval `every` (written `text`) over [`MAX_EVERY_DAYS`]: it would never run.
pub(super) fn not_too_long(text: &str, every: Duration) -> Result<(), String> {
    const SECS_PER_DAY: u64 = 86_400;
    if every > Duration::from_secs(MAX_EVERY_DAYS * SECS_PER_DAY) {
        return Err(format!(
            "{:?} is longer than {MAX_EVERY_DAYS} days (100 years): a schedule that long would \
             never run",
            text.trim()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
