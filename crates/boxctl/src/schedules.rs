//! How schedules read for people: the `boxctl schedules` table, a run's outcome in words, and
//! what `boxctl schedule run|pause|resume` answered.

use crate::approvals::age_words;
use crate::format::end_words;
use crate::safe_text::{one_line, terminal_safe};
use bxcore::{Timestamp, TurnEnd};
use proto::api::{
    RunOutcome, RunTrigger, ScheduleInfo, ScheduleList, ScheduleRun, ScheduleStarted,
};

/// A time as the table shows it: to the second, in UTC (`2026-01-03 07:00:00Z`); loopd keeps
/// every time in UTC, so the table does too, whatever a cron expression's time zone.
pub fn time_words(time: &Timestamp) -> String {
    let text = time.to_rfc3339();
    match text.get(..19) {
        Some(head) if text.len() > 19 => format!("{}Z", head.replacen('T', " ", 1)),
        _ => text,
    }
}

/// How far `then` is from `now`, in words: `in 3h`, `5m ago`, `now`.
pub fn relative_words(then: &Timestamp, now: &Timestamp) -> String {
    let delta = then.unix_seconds().saturating_sub(now.unix_seconds());
    let words = age_words(delta.unsigned_abs());
    match delta {
        0 => "now".into(),
        1.. => format!("in {words}"),
        _ => format!("{words} ago"),
    }
}

/// When a schedule runs, with the time zone its cron expression is read in:
/// `cron 0 7 * * * (Europe/Berlin)`, `every 30m` (an interval has no time zone).
pub fn timing_words(info: &ScheduleInfo) -> String {
    let timing = one_line(&info.timing, None);
    match info.timing.starts_with("cron ") {
        true => format!("{timing} ({})", one_line(&info.timezone, None)),
        false => timing,
    }
}

/// When it runs next by itself: `2026-01-03 07:00:00Z (in 4h)`, or why it does not:
/// `disabled`, `paused`, `disabled, paused`; `-` when loopd names no time.
pub fn next_run_words(info: &ScheduleInfo, now: &Timestamp) -> String {
    let held: Vec<&str> = [(!info.enabled, "disabled"), (info.paused, "paused")]
        .into_iter()
        .filter_map(|(holds, word)| holds.then_some(word))
        .collect();
    if !held.is_empty() {
        return held.join(", ");
    }
    match &info.next_run {
        Some(next) => format!("{} ({})", time_words(next), relative_words(next, now)),
        None => "-".into(),
    }
}

/// Why a run started, as a word: `due`, `catch-up`, `manual`.
pub fn trigger_words(trigger: RunTrigger) -> &'static str {
    match trigger {
        RunTrigger::Due => "due",
        RunTrigger::CatchUp => "catch-up",
        RunTrigger::Manual => "manual",
    }
}

/// A run as words: its trigger, when it started, and where it ran (`session#turn`):
/// `due 2026-01-02 07:00:00Z, daily-20260102T070000Z#1`.
pub fn run_words(run: &ScheduleRun) -> String {
    let session = terminal_safe(run.session.as_str());
    let at = match run.turn {
        Some(turn) => format!("{session}#{turn}"),
        None => session.into_owned(),
    };
    format!(
        "{} {}, {at}",
        trigger_words(run.trigger),
        time_words(&run.started)
    )
}

/// How a run went, in words: `running`, `done`, `done, notified`, `done, 1 call not approved`,
/// `failed: why` (its turn failed), `skipped: why`, `failed: why` (it could not start).
pub fn outcome_words(outcome: &RunOutcome) -> String {
    match outcome {
        RunOutcome::Running => "running".into(),
        RunOutcome::Ended {
            end,
            notified,
            not_approved,
        } => {
            let mut words = match end {
                TurnEnd::Done => "done".to_string(),
                other => end_words(other),
            };
            if *notified {
                words.push_str(", notified");
            }
            match not_approved {
                0 => {}
                1 => words.push_str(", 1 call not approved"),
                n => words.push_str(&format!(", {n} calls not approved")),
            }
            words
        }
        RunOutcome::Skipped { reason } => format!("skipped: {}", one_line(reason, None)),
        RunOutcome::Failed { reason } => format!("failed: {}", one_line(reason, None)),
    }
}

/// The schedules as a table with a header, times relative to `now`; a line saying so when
/// none is configured.
pub fn schedules_table(list: &ScheduleList, now: &Timestamp) -> String {
    if list.schedules.is_empty() {
        return "no schedules configured ([[schedules]] or [heartbeat] in loopd.toml)\n".into();
    }
    let rows: Vec<[String; 5]> = list
        .schedules
        .iter()
        .map(|s| {
            let (last, outcome) = match &s.last_run {
                Some(run) => (run_words(run), outcome_words(&run.outcome)),
                None => ("never".into(), "-".into()),
            };
            [
                one_line(&s.name, None),
                timing_words(s),
                next_run_words(s, now),
                last,
                outcome,
            ]
        })
        .collect();
    crate::table::columns(["NAME", "TIMING", "NEXT RUN", "LAST RUN", "OUTCOME"], &rows)
}

/// What `boxctl schedule run` answered, as one line: where the run goes and how to watch it.
pub fn started_line(started: &ScheduleStarted) -> String {
    let session = terminal_safe(started.session.as_str());
    format!(
        "{} runs now: session {session}, turn {} (boxctl show {session} --follow watches it)",
        one_line(&started.name, None),
        started.turn
    )
}

/// What `boxctl schedule pause|resume` answered, as one line: the flag as loopd now keeps it,
/// and what follows from it.
pub fn paused_line(info: &ScheduleInfo, now: &Timestamp) -> String {
    let name = one_line(&info.name, None);
    if info.paused {
        return format!(
            "{name} is paused (kept across restarts): it does not run by itself until \
             boxctl schedule resume {name}"
        );
    }
    if !info.enabled {
        return format!(
            "{name} is not paused, but disabled in loopd.toml: it does not run by itself"
        );
    }
    format!("{name} is resumed: next run {}", next_run_words(info, now))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use bxcore::SessionId;

    fn time(t: &str) -> Timestamp {
        Timestamp::parse(t).unwrap()
    }

    fn run(trigger: RunTrigger, turn: Option<u64>, outcome: RunOutcome) -> ScheduleRun {
        ScheduleRun {
            started: time("2026-01-02T07:00:00.25Z"),
            trigger,
            session: SessionId::new("daily-20260102T070000Z").unwrap(),
            turn,
            outcome,
        }
    }

    fn info(name: &str, timing: &str, last_run: Option<ScheduleRun>) -> ScheduleInfo {
        ScheduleInfo {
            name: name.into(),
            timing: timing.into(),
            timezone: "Europe/Berlin".into(),
            session: "new".into(),
            enabled: true,
            paused: false,
            next_run: Some(time("2026-01-03T07:00:00Z")),
            last_due: None,
            last_run,
        }
    }

    fn ended(end: TurnEnd, notified: bool, not_approved: u32) -> RunOutcome {
        RunOutcome::Ended {
            end,
            notified,
            not_approved,
        }
    }

    #[test]
    fn outcomes_read_as_words() {
        let failed = TurnEnd::Failed {
            reason: "llama-server is gone".into(),
        };
        let cases = [
            (RunOutcome::Running, "running"),
            (ended(TurnEnd::Done, false, 0), "done"),
            (ended(TurnEnd::Done, true, 0), "done, notified"),
            (ended(TurnEnd::Done, false, 1), "done, 1 call not approved"),
            (
                ended(TurnEnd::Done, true, 3),
                "done, notified, 3 calls not approved",
            ),
            (ended(failed, false, 0), "failed: llama-server is gone"),
            (ended(TurnEnd::MaxSteps, false, 0), "max_steps"),
            (ended(TurnEnd::Interrupted, false, 0), "interrupted"),
            (
                RunOutcome::Skipped {
                    reason: "the previous run still goes".into(),
                },
                "skipped: the previous run still goes",
            ),
            (
                RunOutcome::Failed {
                    reason: "cannot read /etc/boxmaker/m.md:\nno such file\x1b[31m".into(),
                },
                "failed: cannot read /etc/boxmaker/m.md: ⏎ no such file[31m",
            ),
        ];
        for (outcome, words) in cases {
            assert_eq!(outcome_words(&outcome), words, "{outcome:?}");
        }
    }

    #[test]
    fn times_read_to_the_second_in_utc_and_relative_to_now() {
        assert_eq!(
            time_words(&time("2026-01-02T07:00:00.123456Z")),
            "2026-01-02 07:00:00Z"
        );
        assert_eq!(
            time_words(&time("2026-01-02T08:00:00+01:00")),
            "2026-01-02 07:00:00Z"
        );
        let now = time("2026-01-02T07:00:00Z");
        assert_eq!(relative_words(&time("2026-01-02T10:00:00Z"), &now), "in 3h");
        assert_eq!(
            relative_words(&time("2026-01-02T06:55:00Z"), &now),
            "5m ago"
        );
        assert_eq!(relative_words(&now, &now), "now");
    }

    #[test]
    fn next_run_says_disabled_or_paused_instead_of_a_time() {
        let now = time("2026-01-02T07:00:00Z");
        let mut s = info("daily", "cron 0 7 * * *", None);
        assert_eq!(next_run_words(&s, &now), "2026-01-03 07:00:00Z (in 1d)");
        s.paused = true;
        assert_eq!(next_run_words(&s, &now), "paused");
        s.enabled = false;
        assert_eq!(next_run_words(&s, &now), "disabled, paused");
        s.paused = false;
        assert_eq!(next_run_words(&s, &now), "disabled");
        s.enabled = true;
        s.next_run = None;
        assert_eq!(next_run_words(&s, &now), "-");
    }

    #[test]
    fn the_table_lines_up_every_schedule_and_says_when_there_is_none() {
        let now = time("2026-01-02T09:00:00Z");
        let empty = ScheduleList { schedules: vec![] };
        assert_eq!(
            schedules_table(&empty, &now),
            "no schedules configured ([[schedules]] or [heartbeat] in loopd.toml)\n"
        );
        let done = run(RunTrigger::Due, Some(4), ended(TurnEnd::Done, true, 1));
        let mut paused = info("heartbeat", "every 30m", None);
        paused.paused = true;
        paused.next_run = None;
        let list = ScheduleList {
            schedules: vec![info("daily", "cron 0 7 * * *", Some(done)), paused],
        };
        let expected = "\
NAME       TIMING                          NEXT RUN                       LAST RUN                                            OUTCOME
daily      cron 0 7 * * * (Europe/Berlin)  2026-01-03 07:00:00Z (in 22h)  due 2026-01-02 07:00:00Z, daily-20260102T070000Z#4  done, notified, 1 call not approved
heartbeat  every 30m                       paused                         never                                               -
";
        assert_eq!(schedules_table(&list, &now), expected);
    }

    #[test]
    fn a_run_names_its_trigger_and_where_it_went() {
        let manual = run(RunTrigger::Manual, None, RunOutcome::Running);
        assert_eq!(
            run_words(&manual),
            "manual 2026-01-02 07:00:00Z, daily-20260102T070000Z"
        );
        let catch_up = run(RunTrigger::CatchUp, Some(2), RunOutcome::Running);
        assert_eq!(
            run_words(&catch_up),
            "catch-up 2026-01-02 07:00:00Z, daily-20260102T070000Z#2"
        );
    }

    #[test]
    fn run_pause_and_resume_answers_read_as_one_line() {
        let started = ScheduleStarted {
            name: "daily".into(),
            session: SessionId::new("daily-20260102T090000Z").unwrap(),
            turn: 1,
        };
        assert_eq!(
            started_line(&started),
            "daily runs now: session daily-20260102T090000Z, turn 1 \
             (boxctl show daily-20260102T090000Z --follow watches it)"
        );
        let now = time("2026-01-02T09:00:00Z");
        let mut s = info("daily", "cron 0 7 * * *", None);
        assert_eq!(
            paused_line(&s, &now),
            "daily is resumed: next run 2026-01-03 07:00:00Z (in 22h)"
        );
        s.enabled = false;
        assert_eq!(
            paused_line(&s, &now),
            "daily is not paused, but disabled in loopd.toml: it does not run by itself"
        );
        s.paused = true;
        assert_eq!(
            paused_line(&s, &now),
            "daily is paused (kept across restarts): it does not run by itself until \
             boxctl schedule resume daily"
        );
    }
}
