//! What a restart does to a run a crash cut (issue 33): a run written down as running whose
//! task never reached the engine is submitted again at start, once, with the same task id and
//! session; one whose task did reach it is answered from there and not run again; a stopped
//! schedule's cut run is not; `run_once` counts the cut run as its one catch-up. And an `every`
//! schedule keeps its phase across a restart.

use super::*;
use crate::schedule::timing::timestamp;
use bxcore::{SessionId, TaskId, TurnEnd};
use proto::api::{RunOutcome, RunTrigger};
use std::sync::atomic::Ordering;

const HOUR: Duration = Duration::from_secs(3_600);

async fn wait_on(count: &tokio::sync::watch::Sender<usize>, n: usize) {
    let mut count = count.subscribe();
    tokio::time::timeout(Duration::from_millis(WAIT_MS), count.wait_for(|c| *c >= n))
        .await
        .expect("it came in time")
        .unwrap();
}

/// The task id of a run of `name` due at `due` (`s<unix ms>-<name>`, `docs/schedules.md`).
fn task_id(name: &str, due: &str) -> TaskId {
    TaskId::new(&format!("s{}-{name}", utc(due).timestamp_millis())).unwrap()
}

/// Starts the scheduler over `specs`, lets its first run fall due at 11:00 and "kills" loopd
/// (stops the scheduler, which abandons the run) after the run was written down and before
/// its task reached the engine. The bed's clock then reads `restart_at`.
fn cut_before_submit(bed: &Bed, specs: Vec<Spec>, restart_at: &str) {
    rt().block_on(async {
        bed.stub.hold.store(true, Ordering::SeqCst);
        let s = bed.start(specs);
        bed.advance(HOUR);
        wait_on(&bed.stub.held, 1).await;
        s.stop().await;
    });
    bed.stub.hold.store(false, Ordering::SeqCst);
    assert!(bed.stub.got().is_empty(), "nothing reached the engine");
    let run = bed
        .state()
        .schedules
        .values()
        .next()
        .unwrap()
        .last_run
        .clone();
    assert_eq!(run.map(|r| r.outcome), Some(RunOutcome::Running));
    bed.clock.set(utc(restart_at));
}

#[test]
fn a_run_cut_before_its_task_reached_the_engine_runs_once_at_the_next_start() {
    let bed = Bed::at("2026-01-01T10:00:00Z");
    let hourly = || spec(r#"{"name": "m", "every": "1h", "session": "reports"}"#);
    cut_before_submit(&bed, vec![hourly()], "2026-01-01T11:20:00Z");
    rt().block_on(async {
        let s = bed.start(vec![hourly()]);
        wait_counts(&s, |c| c.resumed >= 1 && c.started >= 1).await;
        let got = bed.stub.got();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].session.as_str(), "reports");
        assert_eq!(got[0].text, "do the thing");
        assert!(got[0].unattended);
        assert_eq!(
            got[0].task_id,
            Some(task_id("m", "2026-01-01T11:00:00Z")),
            "the run's own task id: the engine runs it once"
        );
        bed.stub.end(0, "late but done", TurnEnd::Done, 0);
        wait_counts(&s, |c| c.finished >= 1).await;
        let run = s.list().schedules[0].last_run.clone().unwrap();
        assert_eq!((run.trigger, run.turn), (RunTrigger::Due, Some(1)));
        assert!(matches!(
            run.outcome,
            RunOutcome::Ended {
                end: TurnEnd::Done,
                notified: true,
                ..
            }
        ));
        s.stop().await;
        // Ended and written down: the next start has nothing to submit again, and the
        // schedule is free for a manual run.
        let s = bed.start(vec![hourly()]);
        let manual = s.run_now("m").await;
        assert!(manual.is_ok(), "not left running: {manual:?}");
        wait_counts(&s, |c| c.started >= 1).await;
        s.stop().await;
    });
    let got = bed.stub.got();
    assert_eq!(
        got.len(),
        2,
        "the cut run once, then the manual one: {got:?}"
    );
    assert!(
        got[1].task_id.as_ref().unwrap().as_str().starts_with('m'),
        "{got:?}"
    );
    assert_eq!(bed.notifications().len(), 1);
}

#[test]
fn a_new_session_run_cut_before_its_task_reached_the_engine_goes_to_its_own_session() {
    let bed = Bed::at("2026-01-01T10:00:00Z");
    let fresh = || spec(r#"{"name": "n", "every": "1h"}"#);
    cut_before_submit(&bed, vec![fresh()], "2026-01-01T11:20:00Z");
    let recorded: SessionId = bed.state().schedules["n"].last_run.clone().unwrap().session;
    assert!(recorded.as_str().starts_with("n-20260101T110000Z-"));
    rt().block_on(async {
        let s = bed.start(vec![fresh()]);
        wait_counts(&s, |c| c.resumed >= 1 && c.started >= 1).await;
        s.stop().await;
    });
    let got = bed.stub.got();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        got[0].session, recorded,
        "the session written down, not a new draw"
    );
    assert!(got[0].new_session, "still only into a session nobody made");
    assert_eq!(got[0].task_id, Some(task_id("n", "2026-01-01T11:00:00Z")));
}

#[test]
fn a_run_whose_task_reached_the_engine_is_not_run_again_at_the_next_start() {
    let bed = Bed::at("2026-01-01T10:00:00Z");
    let hourly = || spec(r#"{"name": "m", "every": "1h", "session": "reports"}"#);
    rt().block_on(async {
        let s = bed.start(vec![hourly()]);
        bed.advance(HOUR);
        wait_counts(&s, |c| c.started >= 1).await;
        // Killed while its turn went on.
        s.stop().await;
        bed.clock.set(utc("2026-01-01T11:20:00Z"));
        let s = bed.start(vec![hourly()]);
        wait_counts(&s, |c| c.resumed >= 1 && c.finished >= 1).await;
        let run = s.list().schedules[0].last_run.clone().unwrap();
        assert_eq!(run.turn, Some(1), "its turn, as the engine's log has it");
        assert_eq!(
            run.outcome,
            RunOutcome::Ended {
                end: TurnEnd::Interrupted,
                notified: false,
                not_approved: 0
            }
        );
        s.stop().await;
    });
    assert_eq!(*bed.stub.replayed.borrow(), 1, "submitted again, once");
    assert_eq!(bed.stub.got().len(), 1, "and run once");
    assert!(
        !bed.paths().notifications.exists(),
        "an answer from the log is not notified"
    );
}

#[test]
fn a_paused_schedules_cut_run_is_not_submitted_again() {
    let bed = Bed::at("2026-01-01T10:00:00Z");
    let hourly = || spec(r#"{"name": "m", "every": "1h", "session": "reports"}"#);
    cut_before_submit(&bed, vec![hourly()], "2026-01-01T11:20:00Z");
    let mut state = bed.state().schedules["m"].clone();
    state.paused = true;
    bed.write_state("m", state);
    rt().block_on(async {
        let s = bed.start(vec![hourly()]);
        let run = s.list().schedules[0].last_run.clone().unwrap();
        assert!(
            matches!(
                run.outcome,
                RunOutcome::Ended {
                    end: TurnEnd::Interrupted,
                    ..
                }
            ),
            "{run:?}"
        );
        // By hand it still runs, and nothing else was started.
        s.run_now("m").await.unwrap();
        s.stop().await;
    });
    let got = bed.stub.got();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].task_id.as_ref().unwrap().as_str().starts_with('m'));
}

#[test]
fn with_run_once_a_cut_run_that_runs_at_start_is_the_one_catch_up() {
    let bed = Bed::at("2026-01-01T10:00:00Z");
    let hourly =
        || spec(r#"{"name": "m", "every": "1h", "session": "reports", "missed": "run_once"}"#);
    // Down from 11:00 to 14:30: the 12:00, 13:00 and 14:00 runs were missed too.
    cut_before_submit(&bed, vec![hourly()], "2026-01-01T14:30:00Z");
    rt().block_on(async {
        let s = bed.start(vec![hourly()]);
        wait_counts(&s, |c| c.started >= 1).await;
        bed.stub.end(0, "done", TurnEnd::Done, 0);
        wait_counts(&s, |c| c.resumed >= 1 && c.finished >= 1).await;
        let info = &s.list().schedules[0];
        assert_eq!(info.last_due, Some(timestamp(utc("2026-01-01T14:00:00Z"))));
        assert_eq!(
            info.next_run,
            Some(timestamp(utc("2026-01-01T15:00:00Z"))),
            "in phase"
        );
        s.stop().await;
    });
    let got = bed.stub.got();
    assert_eq!(
        got.len(),
        1,
        "one run, not the cut one and a catch-up: {got:?}"
    );
    assert_eq!(got[0].task_id, Some(task_id("m", "2026-01-01T11:00:00Z")));
}

#[test]
fn with_run_once_a_cut_run_that_had_run_is_followed_by_the_catch_up() {
    let bed = Bed::at("2026-01-01T10:00:00Z");
    let hourly =
        || spec(r#"{"name": "m", "every": "1h", "session": "reports", "missed": "run_once"}"#);
    rt().block_on(async {
        let s = bed.start(vec![hourly()]);
        bed.advance(HOUR);
        wait_counts(&s, |c| c.started >= 1).await;
        s.stop().await;
        bed.clock.set(utc("2026-01-01T14:30:00Z"));
        let s = bed.start(vec![hourly()]);
        // The cut run answered from the engine's log (started once), then the catch-up.
        wait_counts(&s, |c| c.resumed >= 1 && c.started >= 2).await;
        let run = s.list().schedules[0].last_run.clone().unwrap();
        assert_eq!(run.trigger, RunTrigger::CatchUp);
        s.stop().await;
    });
    let got = bed.stub.got();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1].task_id, Some(task_id("m", "2026-01-01T14:00:00Z")));
}

#[test]
fn a_restart_keeps_an_every_schedules_phase() {
    let bed = Bed::at("2026-01-01T10:00:00Z");
    let hourly = || spec(r#"{"name": "m", "every": "1h", "session": "reports"}"#);
    rt().block_on(async {
        let s = bed.start(vec![hourly()]);
        bed.advance(HOUR);
        wait_counts(&s, |c| c.started >= 1).await;
        bed.stub.end(0, "done", TurnEnd::Done, 0);
        wait_counts(&s, |c| c.finished >= 1).await;
        s.stop().await;
        // Restarted 40 minutes after the 11:00 run: the next is at 12:00, not 12:40.
        bed.clock.set(utc("2026-01-01T11:40:00Z"));
        let s = bed.start(vec![hourly()]);
        assert_eq!(
            s.list().schedules[0].next_run,
            Some(timestamp(utc("2026-01-01T12:00:00Z")))
        );
        bed.clock.set(utc("2026-01-01T12:00:00Z"));
        wait_counts(&s, |c| c.started >= 1).await;
        s.stop().await;
    });
    assert_eq!(
        bed.stub.got()[1].task_id,
        Some(task_id("m", "2026-01-01T12:00:00Z"))
    );
}
