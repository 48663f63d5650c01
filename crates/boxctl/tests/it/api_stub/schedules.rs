//! The stub's schedules: `daily` (cron, last run done and notified) and `hourly` (every 1h, its
//! last run still going, so running it again is refused as busy); pausing and resuming change
//! what the list says, as loopd's durable flag would.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use bxcore::{SessionId, Timestamp, TurnEnd};
use loopd::api::ApiFailure;
use proto::api::{
    RunOutcome, RunTrigger, ScheduleInfo, ScheduleList, ScheduleRun, ScheduleStarted,
};
use std::sync::Mutex;

/// The stub's schedules, sorted by name as loopd lists them.
pub struct StubSchedules(pub Mutex<Vec<ScheduleInfo>>);

impl Default for StubSchedules {
    fn default() -> StubSchedules {
        StubSchedules(Mutex::new(vec![stub_schedule(false), stub_hourly()]))
    }
}

impl StubSchedules {
    pub fn list(&self) -> ScheduleList {
        ScheduleList {
            schedules: self.0.lock().unwrap().clone(),
        }
    }

    pub fn run(&self, name: &str) -> Result<ScheduleStarted, ApiFailure> {
        let schedules = self.0.lock().unwrap();
        let schedule = find(&schedules, name)?;
        if let Some(ScheduleRun {
            outcome: RunOutcome::Running,
            ..
        }) = &schedule.last_run
        {
            return Err(ApiFailure::Busy(format!(
                "schedule {name}: its previous run still goes"
            )));
        }
        Ok(ScheduleStarted {
            name: name.to_string(),
            session: SessionId::new("daily-20260102T070000Z").unwrap(),
            turn: 1,
        })
    }

    pub fn pause(&self, name: &str, paused: bool) -> Result<ScheduleInfo, ApiFailure> {
        let mut schedules = self.0.lock().unwrap();
        find(&schedules, name)?;
        let schedule = schedules.iter_mut().find(|s| s.name == name).unwrap();
        schedule.paused = paused;
        schedule.next_run = (!paused).then(|| time("2026-01-03T07:00:00Z"));
        Ok(schedule.clone())
    }
}

fn find<'a>(schedules: &'a [ScheduleInfo], name: &str) -> Result<&'a ScheduleInfo, ApiFailure> {
    schedules
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| ApiFailure::NotFound(format!("no schedule named {name:?}")))
}

fn time(t: &str) -> Timestamp {
    Timestamp::parse(t).unwrap()
}

/// The schedule `daily`, at 07:00 UTC, last run done (and notified).
pub fn stub_schedule(paused: bool) -> ScheduleInfo {
    ScheduleInfo {
        name: "daily".into(),
        timing: "cron 0 7 * * *".into(),
        timezone: "UTC".into(),
        session: "new".into(),
        enabled: true,
        paused,
        next_run: (!paused).then(|| time("2026-01-03T07:00:00Z")),
        last_due: Some(time("2026-01-02T07:00:00Z")),
        last_run: Some(ScheduleRun {
            started: time("2026-01-02T07:00:00Z"),
            trigger: RunTrigger::Due,
            session: SessionId::new("daily-20260102T070000Z").unwrap(),
            turn: Some(1),
            outcome: RunOutcome::Ended {
                end: TurnEnd::Done,
                notified: true,
                not_approved: 0,
            },
        }),
    }
}

/// The schedule `hourly`, every hour in session `checks`, its last run (a manual one) still
/// going.
pub fn stub_hourly() -> ScheduleInfo {
    ScheduleInfo {
        name: "hourly".into(),
        timing: "every 1h".into(),
        timezone: "UTC".into(),
        session: "checks".into(),
        enabled: true,
        paused: false,
        next_run: Some(time("2026-01-02T08:00:00Z")),
        last_due: Some(time("2026-01-02T06:00:00Z")),
        last_run: Some(ScheduleRun {
            started: time("2026-01-02T06:30:00Z"),
            trigger: RunTrigger::Manual,
            session: SessionId::new("checks").unwrap(),
            turn: None,
            outcome: RunOutcome::Running,
        }),
    }
}
