//! Each run's end is counted in the meter's `loopd_schedule_runs_total`, by schedule and
//! outcome: a run that ended, one skipped while the previous went, one that went on when loopd
//! stopped (counted as interrupted by the next loopd).

use super::*;
use crate::meter::{Meter, Sampled, ScheduleRuns, system_clock};
use crate::schedule::timing::timestamp;
use bxcore::{SessionId, TurnEnd};
use proto::api::{RunOutcome, RunTrigger, ScheduleRun};

const HOUR: Duration = Duration::from_secs(3_600);

fn meter(bed: &Bed) -> Arc<Meter> {
    let cfg = crate::config::Config {
        state_dir: bed.dir.path().to_path_buf(),
        ..crate::config::Config::default()
    };
    Arc::new(Meter::load(&cfg, system_clock()).unwrap())
}

fn counted(meter: &Meter, outcome: &str) -> bool {
    let text = bxmetrics::exposition::classic(&meter.open_metrics(Sampled::default()).unwrap());
    let line = format!("loopd_schedule_runs_total{{schedule=\"m\",outcome=\"{outcome}\"}} 1");
    text.lines().any(|l| l == line)
}

#[test]
fn a_run_that_ended_and_one_skipped_are_counted_by_outcome() {
    let bed = Bed::at("2026-01-01T10:00:00Z");
    let meter = meter(&bed);
    rt().block_on(async {
        let s = Scheduler::start(
            Arc::clone(&bed.stub),
            vec![spec(
                r#"{"name": "m", "every": "1h", "session": "reports"}"#,
            )],
            bed.paths(),
            Arc::clone(&bed.clock) as Arc<dyn crate::schedule::Clock>,
            ScheduleRuns::into_meter(Arc::clone(&meter)),
        )
        .unwrap();
        bed.advance(HOUR);
        wait_counts(&s, |c| c.started >= 1).await;
        bed.advance(HOUR);
        wait_counts(&s, |c| c.skipped >= 1).await;
        assert!(counted(&meter, "skipped"));
        assert!(!counted(&meter, "done"), "not before it ends");
        bed.stub.end(0, "fine", TurnEnd::Done, 0);
        wait_counts(&s, |c| c.finished >= 1).await;
        s.stop().await;
    });
    assert!(counted(&meter, "done"));
}

#[test]
fn a_run_left_running_by_a_stopped_loopd_is_counted_interrupted_at_the_next_start() {
    let bed = Bed::at("2026-01-01T10:30:00Z");
    bed.write_state(
        "m",
        crate::schedule::state::ScheduleState {
            last_due: Some(timestamp(utc("2026-01-01T10:00:00Z"))),
            last_run: Some(ScheduleRun {
                started: timestamp(utc("2026-01-01T10:00:00Z")),
                trigger: RunTrigger::Due,
                session: SessionId::new("reports").unwrap(),
                turn: Some(3),
                outcome: RunOutcome::Running,
            }),
            paused: false,
            in_flight: None,
        },
    );
    let meter = meter(&bed);
    rt().block_on(async {
        let s = Scheduler::start(
            Arc::clone(&bed.stub),
            vec![spec(
                r#"{"name": "m", "every": "1h", "session": "reports"}"#,
            )],
            bed.paths(),
            Arc::clone(&bed.clock) as Arc<dyn crate::schedule::Clock>,
            ScheduleRuns::into_meter(Arc::clone(&meter)),
        )
        .unwrap();
        s.stop().await;
    });
    assert!(counted(&meter, "interrupted"));
}

#[test]
fn a_run_counted_while_still_running_reads_as_a_word_the_metrics_list() {
    // docs/metrics.md lists the turn's ends, `skipped` and `not_started`: a run whose end was
    // not seen reads `interrupted`, as one a stopped loopd left running.
    assert_eq!(
        crate::schedule::runner::outcome_word(&RunOutcome::Running),
        "interrupted"
    );
}
