//! The bodies of loopd's schedule routes (`GET /v1/schedules`, `POST /v1/schedules/{name}/run`,
//! `.../pause`, `.../resume`): tasks that run at set times, the heartbeat among them.

use bxcore::{SessionId, Timestamp, TurnEnd};
use serde::{Deserialize, Serialize};

/// One schedule as `boxctl schedules` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleInfo {
    /// Its unique name (`heartbeat` for the heartbeat).
    pub name: String,
    /// When it runs, as configured: `cron 0 7 * * *` or `every 30m`.
    pub timing: String,
    /// The IANA time zone its cron expression is read in (`UTC` by default).
    pub timezone: String,
    /// The session its runs go to, or `new` for a fresh session per run.
    pub session: String,
    /// `enabled` in the config: a disabled schedule never runs by itself.
    pub enabled: bool,
    /// Paused by the owner (`boxctl schedule pause`), kept across restarts.
    pub paused: bool,
    /// When it runs next by itself; absent when disabled or paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run: Option<Timestamp>,
    /// The due time of its last run (or skipped run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_due: Option<Timestamp>,
    /// Its last run, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<ScheduleRun>,
}

/// One run of a schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleRun {
    /// When it started.
    pub started: Timestamp,
    /// Why it ran: `due` (its time came), `catch_up` (`missed = "run_once"` at start), or
    /// `manual` (`boxctl schedule run`).
    pub trigger: RunTrigger,
    /// The session it ran in.
    pub session: SessionId,
    /// Its turn in that session, once the task was accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u64>,
    /// How it went.
    pub outcome: RunOutcome,
}

/// Why a run started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunTrigger {
    /// Its time came.
    Due,
    /// It fell due while loopd was down, and the schedule says `missed = "run_once"`.
    CatchUp,
    /// The owner ran it (`boxctl schedule run`).
    Manual,
}

/// How a run went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case", deny_unknown_fields)]
pub enum RunOutcome {
    /// It runs now. One that loopd stopped (or was killed) during reads as ended
    /// `interrupted` after a restart, as its turn does.
    Running,
    /// Its turn ended.
    Ended {
        /// How.
        end: TurnEnd,
        /// Whether its answer was kept as a notification.
        notified: bool,
        /// Calls that waited for the owner's approval and did not run (denied, unanswered or
        /// void): an unattended run fails closed, and says so here.
        #[serde(default, skip_serializing_if = "is_zero")]
        not_approved: u32,
    },
    /// It did not run: the previous run was still going.
    Skipped {
        /// Why, in words.
        reason: String,
    },
    /// It could not start (the task file unreadable, the task refused).
    Failed {
        /// Why, in words.
        reason: String,
    },
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Every schedule, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleList {
    /// The schedules, sorted by name.
    pub schedules: Vec<ScheduleInfo>,
}

/// What `POST /v1/schedules/{name}/run` answers: the run was started (its task accepted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleStarted {
    /// The schedule.
    pub name: String,
    /// The session the run goes to.
    pub session: SessionId,
    /// Its turn there.
    pub turn: u64,
}
