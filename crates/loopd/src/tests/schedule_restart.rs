#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A scheduled run a crash cut, through a real engine (fakellama) and the scheduler on a fake
//! clock (issue 33): loopd is killed while the run's task waits for the main slot, after the
//! run was written down as running and before its user record exists. The next loopd submits
//! it again, once, with its task id: it runs, in the session written down (a `new` one too).
//! When the task had got its user record before the kill, the next loopd's submission is
//! answered from the session's log and nothing runs twice, also for a `new` session, whose
//! "exists already" refusal is for sessions someone else made, which still holds.

use crate::api::Backend;
use crate::config::Config;
use crate::engine::{Engine, EngineParts, ToolSource};
use crate::llama::ServerInfo;
use crate::llama::tests::support::Fake;
use crate::schedule::clock::FakeClock;
use crate::schedule::state::{self, SCHEDULES_FILE, ScheduleState};
use crate::schedule::{Clock, Paths, Scheduler, specs};
use crate::session::Store;
use crate::tools::{FakeTools, Registry};
use bxcore::{LogRecord, SessionId, TaskId, TurnEnd};
use chrono::{DateTime, Utc};
use proto::api::{RunOutcome, ScheduleRun, TaskRequest};
use std::sync::Arc;
use std::time::Duration;

/// The longest the test waits for anything, in milliseconds.
const WAIT_MS: u64 = 20_000;
const HOUR: Duration = Duration::from_secs(3_600);

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

/// fakellama, a state dir with the schedule `report` (hourly, into `session`) and a clock.
struct Bed {
    fake: Fake,
    cfg: Config,
    clock: Arc<FakeClock>,
    _dir: tempfile::TempDir,
}

impl Bed {
    fn new(session: &str) -> Bed {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("system.md"), "You are a test.").unwrap();
        let mut cfg = Config {
            state_dir: dir.path().join("state"),
            ..Config::default()
        };
        std::fs::create_dir(&cfg.state_dir).unwrap();
        cfg.baseline.system = dir.path().join("system.md");
        cfg.schedules.push(
            serde_json::from_value(serde_json::json!({
                "name": "report", "every": "1h", "task": "Write the report.",
                "session": session,
            }))
            .unwrap(),
        );
        Bed {
            fake: Fake::script(r#"default_reply = "the report""#),
            cfg,
            clock: FakeClock::at(utc("2026-01-01T10:00:00Z")),
            _dir: dir,
        }
    }

    /// A loopd: an engine and, on the current runtime, its scheduler.
    fn loopd(&self) -> (Engine, Scheduler<Engine>) {
        let engine = self.engine();
        let scheduler = self.scheduler(&engine);
        (engine, scheduler)
    }

    fn engine(&self) -> Engine {
        let cfg = &self.cfg;
        Engine::new(EngineParts {
            cfg: cfg.clone(),
            store: Store::new(&cfg.state_dir).unwrap(),
            port: Arc::new(FakeTools::new()),
            tools: ToolSource::Fake(Registry::m2b()),
            system: "You are a test.".into(),
            models: Arc::new(crate::route::Router::single(
                self.fake.client(),
                &crate::config::Slots::default(),
                ServerInfo {
                    n_ctx: fakellama::DEFAULT_N_CTX,
                    total_slots: 1,
                    model: "fakellama".into(),
                    model_path: String::new(),
                    build_info: String::new(),
                },
            )),
            blocking: self.fake.blocking(),
            meter: Arc::new(crate::meter::Meter::load(cfg, crate::meter::system_clock()).unwrap()),
        })
    }

    /// The scheduler over `engine`, on the current runtime.
    fn scheduler(&self, engine: &Engine) -> Scheduler<Engine> {
        Scheduler::start(
            Arc::new(engine.clone()),
            specs(&self.cfg).unwrap(),
            Paths::of(&self.cfg),
            Arc::clone(&self.clock) as Arc<dyn Clock>,
            crate::meter::ScheduleRuns::default(),
        )
        .unwrap()
    }

    fn state_path(&self) -> std::path::PathBuf {
        self.cfg.state_dir.join(SCHEDULES_FILE)
    }

    fn state(&self) -> ScheduleState {
        state::load(&self.state_path()).unwrap().schedules["report"].clone()
    }

    /// The tasks in session `id`'s log: text and task id.
    fn tasks(&self, id: &SessionId) -> Vec<(String, Option<TaskId>)> {
        Store::new(&self.cfg.state_dir)
            .unwrap()
            .read(id)
            .unwrap()
            .into_iter()
            .filter_map(|r| match r {
                LogRecord::User {
                    content, task_id, ..
                } => Some((content, task_id)),
                _ => None,
            })
            .collect()
    }

    fn notifications(&self) -> usize {
        let path = crate::heartbeat::path(&self.cfg);
        if !path.exists() {
            return 0;
        }
        crate::journal::read_all::<proto::api::Notification>(&path)
            .unwrap()
            .len()
    }
}

/// The last run of `report`, once `ready` holds of it both in the scheduler and in its state
/// file with nothing left in flight (bounded). The scheduler notes the end in memory before it
/// writes the file, and that write runs on the blocking pool, where stopping the scheduler does
/// not stop it: a test that went on at the first sign could stop loopd before the file says
/// so, or find the write landing after its own.
async fn last_run(
    scheduler: &Scheduler<Engine>,
    state_path: &std::path::Path,
    ready: impl Fn(&ScheduleRun) -> bool,
) -> ScheduleRun {
    let written = |path: &std::path::Path| {
        state::load(path).ok().is_some_and(|s| {
            s.schedules
                .get("report")
                .is_some_and(|r| r.in_flight.is_none() && r.last_run.as_ref().is_some_and(&ready))
        })
    };
    let found = tokio::time::timeout(Duration::from_millis(WAIT_MS), async {
        loop {
            let run = scheduler.list().schedules[0].last_run.clone();
            if let Some(run) = run.filter(&ready)
                && written(state_path)
            {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    found.await.expect("the run got there in time")
}

fn ended(run: &ScheduleRun) -> bool {
    matches!(
        run.outcome,
        RunOutcome::Ended { .. } | RunOutcome::Failed { .. }
    )
}

/// How far the first loopd gets before it is killed.
#[derive(Clone, Copy, PartialEq)]
enum Kill {
    /// While the run's task waits for the main slot: no user record.
    BeforeItsUserRecord,
    /// After its turn (user record and end), before the run's end was written down.
    AfterItsTurn,
}

/// The first loopd: the run falls due at 11:00 and its task waits for the main slot (held
/// here), then loopd is killed as `kill` says. Returns the run's session; the state file is
/// left as the kill left it, and the clock reads 11:05.
fn first_loopd(bed: &Bed, kill: Kill) -> SessionId {
    bed.fake.rt.block_on(async {
        let (engine, scheduler) = bed.loopd();
        let held = engine
            .models()
            .main_for(&SessionId::new("somebody-else").unwrap())
            .gate
            .acquire_owned()
            .await
            .unwrap();
        let routed = engine.models().routed();
        bed.clock.advance(HOUR);
        tokio::time::timeout(Duration::from_millis(WAIT_MS), async {
            while engine.models().routed() == routed {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the run's task waits for the main slot");
        let running = bed.state();
        let session = running.last_run.as_ref().unwrap().session.clone();
        assert_eq!(
            running.last_run.as_ref().map(|r| &r.outcome),
            Some(&RunOutcome::Running)
        );
        assert!(!Store::new(&bed.cfg.state_dir).unwrap().exists(&session));
        let at_kill = std::fs::read(bed.state_path()).unwrap();
        match kill {
            Kill::BeforeItsUserRecord => {
                // Killed: nothing of the run goes on (the scheduler is stopped first, as the
                // daemon does, and the engine refuses the task once the slot comes free).
                scheduler.stop().await;
                engine.shutdown(0).await;
                drop(held);
                engine.shutdown(WAIT_MS).await;
            }
            Kill::AfterItsTurn => {
                drop(held);
                let run = last_run(&scheduler, &bed.state_path(), ended).await;
                assert!(matches!(
                    run.outcome,
                    RunOutcome::Ended {
                        end: TurnEnd::Done,
                        ..
                    }
                ));
                scheduler.stop().await;
                engine.shutdown(WAIT_MS).await;
                // What a kill just after the turn, before its end was written, leaves.
                std::fs::write(bed.state_path(), &at_kill).unwrap();
            }
        }
        session
    });
    let session = bed.state().last_run.unwrap().session;
    bed.clock.set(utc("2026-01-01T11:05:00Z"));
    session
}

/// The next loopd: starts, lets the cut run end, stops. Returns that run as written down.
fn next_loopd(bed: &Bed) -> ScheduleRun {
    bed.fake.rt.block_on(async {
        let (engine, scheduler) = bed.loopd();
        let run = last_run(&scheduler, &bed.state_path(), ended).await;
        scheduler.stop().await;
        engine.shutdown(WAIT_MS).await;
        run
    })
}

fn the_runs_task() -> Vec<(String, Option<TaskId>)> {
    let due = utc("2026-01-01T11:00:00Z").timestamp_millis();
    vec![(
        "Write the report.".to_string(),
        Some(TaskId::new(&format!("s{due}-report")).unwrap()),
    )]
}

#[test]
fn a_run_killed_before_its_user_record_runs_once_at_the_next_start() {
    let bed = Bed::new("reports");
    let session = first_loopd(&bed, Kill::BeforeItsUserRecord);
    assert!(!Store::new(&bed.cfg.state_dir).unwrap().exists(&session));
    let run = next_loopd(&bed);
    assert!(
        matches!(
            run.outcome,
            RunOutcome::Ended {
                end: TurnEnd::Done,
                notified: true,
                ..
            }
        ),
        "{run:?}"
    );
    assert_eq!(bed.tasks(&session), the_runs_task(), "run once");
    assert_eq!(bed.state().in_flight, None, "nothing left to submit again");
    // A third start runs nothing more.
    bed.fake.rt.block_on(async {
        let (engine, scheduler) = bed.loopd();
        scheduler.stop().await;
        engine.shutdown(WAIT_MS).await;
    });
    assert_eq!(bed.tasks(&session).len(), 1);
    assert_eq!(bed.notifications(), 1);
}

#[test]
fn a_new_session_run_killed_before_its_user_record_runs_once_in_its_session() {
    let bed = Bed::new("new");
    let session = first_loopd(&bed, Kill::BeforeItsUserRecord);
    assert!(session.as_str().starts_with("report-20260101T110000Z-"));
    let run = next_loopd(&bed);
    assert_eq!(run.session, session);
    assert!(
        matches!(
            run.outcome,
            RunOutcome::Ended {
                end: TurnEnd::Done,
                ..
            }
        ),
        "{run:?}"
    );
    assert_eq!(bed.tasks(&session), the_runs_task());
}

#[test]
fn a_run_killed_after_its_turn_is_not_run_again_at_the_next_start() {
    for session in ["reports", "new"] {
        let bed = Bed::new(session);
        let session = first_loopd(&bed, Kill::AfterItsTurn);
        assert_eq!(bed.tasks(&session), the_runs_task());
        let run = next_loopd(&bed);
        // Answered from the session's log, not refused as a session that exists already.
        assert_eq!(run.turn, Some(1));
        assert_eq!(
            run.outcome,
            RunOutcome::Ended {
                end: TurnEnd::Done,
                notified: false,
                not_approved: 0
            },
            "{session}"
        );
        assert_eq!(bed.tasks(&session), the_runs_task(), "not run twice");
        assert_eq!(bed.notifications(), 1, "not notified twice");
    }
}

#[test]
fn a_new_session_run_killed_after_making_its_session_runs_there_at_the_next_start() {
    let bed = Bed::new("new");
    let session = first_loopd(&bed, Kill::BeforeItsUserRecord);
    // Killed after the worker made the session and before it wrote the user record.
    drop(
        Store::new(&bed.cfg.state_dir)
            .unwrap()
            .create(&session)
            .unwrap(),
    );
    let run = next_loopd(&bed);
    assert!(
        matches!(
            run.outcome,
            RunOutcome::Ended {
                end: TurnEnd::Done,
                ..
            }
        ),
        "{run:?}"
    );
    assert_eq!(bed.tasks(&session), the_runs_task());
}

#[test]
fn a_new_session_a_client_made_before_the_cut_run_was_submitted_again_does_not_get_it() {
    let bed = Bed::new("new");
    let session = first_loopd(&bed, Kill::BeforeItsUserRecord);
    bed.fake.rt.block_on(async {
        let engine = bed.engine();
        // A client who read the run's session id makes it with a task of its own, before the
        // next loopd's scheduler submits the run again.
        let mine = TaskRequest {
            session: Some(session.clone()),
            text: "I was here first".into(),
            task_id: None,
            overheard: Vec::new(),
        };
        let mut submitted = engine.submit(mine).await.unwrap();
        while submitted.events.recv().await.is_some() {}
        let scheduler = bed.scheduler(&engine);
        let run = last_run(&scheduler, &bed.state_path(), ended).await;
        assert!(
            matches!(&run.outcome, RunOutcome::Failed { reason } if reason.contains("exists already")),
            "{run:?}"
        );
        scheduler.stop().await;
        engine.shutdown(WAIT_MS).await;
    });
    assert_eq!(
        bed.tasks(&session),
        [("I was here first".to_string(), None)],
        "only the client's task"
    );
    assert_eq!(
        bed.state().in_flight,
        None,
        "failed and written down: not tried again"
    );
}
