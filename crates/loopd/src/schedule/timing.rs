//! Due times: the next after a time, the latest missed up to now (in a cron expression's time
//! zone, or every interval), the next after a restart (in phase with the last), the session a
//! `new` run goes to and the task id a run's task carries.

use crate::config::Timing;
use bxcore::{TaskId, Timestamp};
use chrono::{DateTime, Utc};
use proto::api::RunTrigger;

/// The most cron due times walked to find the latest one up to now: a minutely expression
/// over more than two months of downtime stops there, and the latest found stands for it.
pub const MAX_CRON_STEPS: usize = 100_000;

/// The latest due time in `(after, now]`; `None` when none fell due.
pub fn latest_due(
    timing: &Timing,
    after: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    match timing {
        Timing::Every(every) => {
            let every = chrono::Duration::from_std(*every).ok()?;
            let steps = (now - after).num_nanoseconds()? / every.num_nanoseconds()?.max(1);
            if steps < 1 {
                return None;
            }
            let steps = i32::try_from(steps).ok()?;
            after.checked_add_signed(every * steps)
        }
        Timing::Cron { .. } => {
            let mut latest = None;
            let mut t = after;
            for _ in 0..MAX_CRON_STEPS {
                match timing.next_after(t) {
                    Some(next) if next <= now => {
                        latest = Some(next);
                        t = next;
                    }
                    _ => break,
                }
            }
            latest
        }
    }
}

/// The next due time of a schedule that loopd (re)starts at `now`, its last due time `last`
/// (missed ones settled: none in `(last, now]`, or, when some are, the first after them): in
/// phase with `last`, so an `every` schedule counts from its last due time, not from the
/// restart; a clock set back since `last` does not bring `last` round again. A schedule never
/// run before counts from `now`.
pub fn next_at_start(
    timing: &Timing,
    last: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let Some(last) = last else {
        return timing.next_after(now);
    };
    let after = latest_due(timing, last, now).unwrap_or(last);
    timing.next_after(after)
}

/// The task id of a run of schedule `name` due at `due` (a manual run: started at `due`):
/// `s<unix ms>-<name>` for a due or catch-up run, `m<unix ms>-<name>` for a manual one. A
/// run's task carries it, so that submitting the task again after a crash
/// (`engine::task_ids`) runs it at most once; a due time and a manual run at the same
/// millisecond do not share it. At most 47 bytes with the longest name (until the year 2286).
pub fn run_task_id(
    name: &str,
    trigger: RunTrigger,
    due: DateTime<Utc>,
) -> Result<TaskId, bxcore::ValueError> {
    let kind = match trigger {
        RunTrigger::Due | RunTrigger::CatchUp => 's',
        RunTrigger::Manual => 'm',
    };
    TaskId::new(&format!("{kind}{}-{name}", due.timestamp_millis()))
}

/// The random bytes in the session id of a run with `session = "new"` (as hex digits): with
/// the longest schedule name (`MAX_SCHEDULE_NAME_BYTES`) and the due time the id is 64 bytes,
/// the most a session id may be.
pub const RUN_SESSION_RANDOM_BYTES: usize = 7;

/// The session of a run of schedule `name` with `session = "new"` due at `due`, with `random`
/// bytes from the OS: `<name>-<YYYYMMDDTHHMMSSZ>-<14 hex digits>`. The due time alone would
/// let a client make that session before the run and have the run's task appended to it.
pub fn new_session_name(
    name: &str,
    due: DateTime<Utc>,
    random: [u8; RUN_SESSION_RANDOM_BYTES],
) -> String {
    format!(
        "{name}-{}-{}",
        due.format("%Y%m%dT%H%M%SZ"),
        hex::encode(random)
    )
}

/// `t` as the API writes it.
pub fn timestamp(t: DateTime<Utc>) -> Timestamp {
    // RFC 3339 from chrono always parses back; the fallback keeps this total.
    Timestamp::parse(&t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
        .unwrap_or_else(|_| Timestamp::now())
}

/// `t` as a time to compute with; `None` for a time chrono cannot hold.
pub fn from_timestamp(t: &Timestamp) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(&t.to_rfc3339())
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::{parse_cron, parse_timezone};
    use std::time::Duration;

    fn utc(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    fn cron(expr: &str, tz: &str) -> Timing {
        Timing::Cron {
            cron: Box::new(parse_cron(expr).unwrap()),
            tz: parse_timezone(tz).unwrap(),
        }
    }

    #[test]
    fn a_time_in_the_spring_gap_runs_at_the_first_instant_after_it() {
        // Europe/Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist.
        let t = cron("30 2 * * *", "Europe/Berlin");
        let day_before = t.next_after(utc("2026-03-28T00:00:00Z")).unwrap();
        assert_eq!(day_before, utc("2026-03-28T01:30:00Z"), "02:30 CET");
        let gap = t.next_after(day_before).unwrap();
        assert_eq!(
            gap,
            utc("2026-03-29T01:00:00Z"),
            "03:00 CEST, just after the gap"
        );
        let after = t.next_after(gap).unwrap();
        assert_eq!(after, utc("2026-03-30T00:30:00Z"), "02:30 CEST");
    }

    #[test]
    fn a_time_that_occurs_twice_in_autumn_runs_once_at_its_first_occurrence() {
        // Europe/Berlin, 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:30 occurs twice.
        let t = cron("30 2 * * *", "Europe/Berlin");
        let first = t.next_after(utc("2026-10-24T12:00:00Z")).unwrap();
        assert_eq!(first, utc("2026-10-25T00:30:00Z"), "02:30 CEST, the first");
        let next = t.next_after(first).unwrap();
        assert_eq!(
            next,
            utc("2026-10-26T01:30:00Z"),
            "not 02:30 CET the same day"
        );
    }

    #[test]
    fn every_is_one_interval_after_the_previous_due_time() {
        let t = Timing::Every(Duration::from_secs(1_800));
        assert_eq!(
            t.next_after(utc("2026-01-01T10:00:00Z")),
            Some(utc("2026-01-01T10:30:00Z"))
        );
    }

    #[test]
    fn the_latest_missed_due_time_is_found_for_both_timings() {
        let every = Timing::Every(Duration::from_secs(1_800));
        let after = utc("2026-01-01T10:00:00Z");
        assert_eq!(latest_due(&every, after, utc("2026-01-01T10:29:59Z")), None);
        assert_eq!(
            latest_due(&every, after, utc("2026-01-01T12:10:00Z")),
            Some(utc("2026-01-01T12:00:00Z"))
        );
        let daily = cron("0 7 * * *", "UTC");
        assert_eq!(
            latest_due(&daily, after, utc("2026-01-04T08:00:00Z")),
            Some(utc("2026-01-04T07:00:00Z"))
        );
        assert_eq!(latest_due(&daily, after, utc("2026-01-01T11:00:00Z")), None);
    }

    #[test]
    fn after_a_restart_every_keeps_its_phase_and_cron_its_times() {
        let every = Timing::Every(Duration::from_secs(3_600));
        let last = Some(utc("2026-01-01T11:00:00Z"));
        assert_eq!(
            next_at_start(&every, last, utc("2026-01-01T11:40:00Z")),
            Some(utc("2026-01-01T12:00:00Z")),
            "from the last due time, not from the restart"
        );
        assert_eq!(
            next_at_start(&every, last, utc("2026-01-01T10:30:00Z")),
            Some(utc("2026-01-01T12:00:00Z")),
            "a clock set back does not bring 11:00 round again"
        );
        assert_eq!(
            next_at_start(&every, last, utc("2026-01-01T14:30:00Z")),
            Some(utc("2026-01-01T15:00:00Z")),
            "past the ones missed, still in phase"
        );
        assert_eq!(
            next_at_start(&every, None, utc("2026-01-01T11:40:00Z")),
            Some(utc("2026-01-01T12:40:00Z")),
            "never run before: one interval from now"
        );
        let daily = cron("0 7 * * *", "UTC");
        assert_eq!(
            next_at_start(&daily, last, utc("2026-01-01T11:40:00Z")),
            Some(utc("2026-01-02T07:00:00Z"))
        );
    }

    #[test]
    fn a_runs_task_id_is_its_schedules_name_and_due_time() {
        let due = utc("2026-01-01T11:00:00.123Z");
        assert_eq!(
            run_task_id("morning", RunTrigger::Due, due)
                .unwrap()
                .as_str(),
            "s1767265200123-morning"
        );
        assert_eq!(
            run_task_id("morning", RunTrigger::CatchUp, due).unwrap(),
            run_task_id("morning", RunTrigger::Due, due).unwrap()
        );
        assert_eq!(
            run_task_id("morning", RunTrigger::Manual, due)
                .unwrap()
                .as_str(),
            "m1767265200123-morning"
        );
        // The longest name and a time stamp of 13 digits (14 from the year 2286) fit.
        let longest = ".".repeat(crate::config::MAX_SCHEDULE_NAME_BYTES);
        let far = utc("2300-01-01T00:00:00Z");
        let id = run_task_id(&longest, RunTrigger::Manual, far);
        assert!(id.is_ok(), "{id:?}");
    }

    #[test]
    fn a_new_session_is_named_by_its_due_time_in_utc_and_random_digits() {
        assert_eq!(
            new_session_name(
                "morning",
                utc("2026-03-29T05:00:07.5+02:00"),
                [0, 1, 2, 0xab, 0xcd, 0xef, 0xff]
            ),
            "morning-20260329T030007Z-000102abcdefff"
        );
        let longest = "a.b_c-d".repeat(5)[..crate::config::MAX_SCHEDULE_NAME_BYTES].to_string();
        let name = new_session_name(&longest, utc("2026-01-01T00:00:00Z"), [0xff; 7]);
        let id = bxcore::SessionId::new(&name);
        assert!(id.is_ok(), "a valid session id: {id:?}");
    }
}
