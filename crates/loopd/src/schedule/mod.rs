//! Schedules (`docs/schedules.md`): tasks loopd runs by itself at set times, the heartbeat
//! among them, through the same `Backend::submit` as a client's task. Each schedule's last
//! due time, last run, paused flag and run in flight are durable (`state`) and written before
//! a run's task is submitted; the task carries an id of the run's own, and a restart submits a
//! run in flight again, so a crash neither repeats a run nor loses one beyond what `missed`
//! says.
//! Time comes from a [`Clock`], so the tests advance it instead of sleeping.

mod answer;
pub mod clock;
mod run;
mod runner;
pub mod state;
#[cfg(test)]
mod tests;
pub mod timing;

pub use clock::{Clock, SystemClock};
#[cfg(test)]
pub use runner::RunCounts;

use crate::api::{ApiFailure, Backend};
use crate::config::{Config, Missed, NEW_SESSION, Notify, Schedule, TaskSource, Timing};
use crate::meter::ScheduleRuns;
use bxcore::SessionId;
use chrono::{DateTime, Utc};
use proto::api::{ScheduleInfo, ScheduleList, ScheduleStarted};
use runner::{AtStart, Shared};
use state::ScheduleState;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// One schedule, ready to run.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Its unique name.
    pub name: String,
    /// When it runs.
    pub timing: Timing,
    /// Its timing as configured (`cron 0 7 * * *`, `every 30m`).
    pub timing_text: String,
    /// The time zone its cron expression is read in.
    pub timezone: String,
    /// Its task.
    pub task: TaskSource,
    /// The fixed session its runs go to; `None`: a fresh one per run.
    pub session: Option<SessionId>,
    /// What to do at start about missed runs.
    pub missed: Missed,
    /// The answer that is quiet.
    pub quiet_reply: Option<String>,
    /// When an answer becomes a notification.
    pub notify: Notify,
    /// Where a channel should send its notifications (`notify_to`).
    pub notify_to: Option<String>,
    /// Whether it runs by itself.
    pub enabled: bool,
}

impl Spec {
    /// The spec of a checked config entry (the heartbeat's too, whose session is reserved:
    /// only the config's check refuses reserved sessions, not this).
    pub fn from_config(s: &Schedule) -> Result<Spec, String> {
        let timing = s
            .timing()
            .map_err(|(key, why)| format!("schedule {}: {key}: {why}", s.name))?;
        let task = s
            .task_source()
            .ok_or_else(|| format!("schedule {}: give task or task_file", s.name))?;
        let session = match s.fixed_session() {
            None => None,
            Some(id) => {
                Some(SessionId::new(id).map_err(|e| format!("schedule {}: session: {e}", s.name))?)
            }
        };
        Ok(Spec {
            name: s.name.clone(),
            timing,
            timing_text: s.timing_text(),
            timezone: s.timezone.clone(),
            task,
            session,
            missed: s.missed,
            quiet_reply: s.quiet_reply.clone(),
            notify: s.notify,
            notify_to: s.notify_to.clone(),
            enabled: s.enabled,
        })
    }
}

/// Every schedule of `cfg`: the heartbeat's (when `[heartbeat] every` is set) and each
/// `[[schedules]]` entry.
pub fn specs(cfg: &Config) -> Result<Vec<Spec>, String> {
    let heartbeat = crate::heartbeat::schedule(cfg)?;
    heartbeat
        .iter()
        .chain(&cfg.schedules)
        .map(Spec::from_config)
        .collect()
}

/// Where the scheduler keeps what it knows.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `<state_dir>/schedules.json`.
    pub state: PathBuf,
    /// `<state_dir>/notifications.jsonl`.
    pub notifications: PathBuf,
}

impl Paths {
    /// The paths of `cfg`.
    pub fn of(cfg: &Config) -> Paths {
        Paths {
            state: cfg.state_dir.join(state::SCHEDULES_FILE),
            notifications: crate::heartbeat::path(cfg),
        }
    }
}

/// The running scheduler.
pub struct Scheduler<B: Backend> {
    shared: Arc<Shared<B>>,
    stop: watch::Sender<bool>,
    driver: Mutex<Option<JoinHandle<()>>>,
}

impl<B: Backend> Scheduler<B> {
    /// Loads the state, submits again the runs a crash cut (written down, not ended), settles
    /// what was missed while loopd was down (`missed`), and starts the scheduler on the
    /// current runtime; each run's end is counted in `runs`. An unreadable state file is an
    /// error: runs would repeat or be lost without it.
    pub fn start(
        backend: Arc<B>,
        specs: Vec<Spec>,
        paths: Paths,
        clock: Arc<dyn Clock>,
        runs: ScheduleRuns,
    ) -> Result<Scheduler<B>, state::StateError> {
        let (shared, at_start) = Shared::load(backend, specs, paths, clock, runs)?;
        let shared = Arc::new(shared);
        let (stop, stop_rx) = watch::channel(false);
        for start in at_start {
            match start {
                AtStart::CatchUp(name, due) => {
                    shared.start_due(&name, due, proto::api::RunTrigger::CatchUp);
                }
                AtStart::Resume {
                    name,
                    flight,
                    catch_up,
                } => shared.resume(&name, flight, catch_up),
            }
        }
        let driver = tokio::spawn(runner::drive(Arc::clone(&shared), stop_rx));
        tracing::info!(schedules = shared.count(), "scheduler started");
        Ok(Scheduler {
            shared,
            stop,
            driver: Mutex::new(Some(driver)),
        })
    }

    /// Every schedule, sorted by name.
    pub fn list(&self) -> ScheduleList {
        self.shared.list()
    }

    /// Runs schedule `name` now (`boxctl schedule run`); resolves once its task is accepted.
    pub async fn run_now(&self, name: &str) -> Result<ScheduleStarted, ApiFailure> {
        Shared::run_now(&self.shared, name).await
    }

    /// Pauses or resumes schedule `name`; returns once the flag is durable.
    pub fn pause(&self, name: &str, paused: bool) -> Result<ScheduleInfo, ApiFailure> {
        self.shared.pause(name, paused)
    }

    /// What its runs did so far, updated after each; only the tests wait on it.
    #[cfg(test)]
    pub fn counts(&self) -> watch::Receiver<RunCounts> {
        self.shared.counts()
    }

    /// Stops it: nothing more runs by itself; a running run is abandoned (its turn goes on,
    /// and ends as `interrupted` when the engine shuts down) and stays `running` and in flight
    /// in the state: the next start submits it again (answered from the log if it got there).
    pub async fn stop(&self) {
        let _ = self.stop.send(true);
        let driver = self.driver.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(driver) = driver
            && let Err(e) = driver.await
        {
            tracing::warn!(error = %e, "the scheduler task failed");
        }
        self.shared.abort_runs();
        tracing::info!("scheduler stopped");
    }
}

/// What `boxctl schedules` shows of a schedule.
fn info(spec: &Spec, state: &ScheduleState, next_due: Option<DateTime<Utc>>) -> ScheduleInfo {
    ScheduleInfo {
        name: spec.name.clone(),
        timing: spec.timing_text.clone(),
        timezone: spec.timezone.clone(),
        session: spec
            .session
            .as_ref()
            .map_or(NEW_SESSION.to_string(), |s| s.as_str().to_string()),
        enabled: spec.enabled,
        paused: state.paused,
        next_run: next_due
            .filter(|_| spec.enabled && !state.paused)
            .map(timing::timestamp),
        last_due: state.last_due,
        last_run: state.last_run.clone(),
    }
}
