//! The scheduler's task and its runs: at each due time a run is begun (marked running and
//! written down), its task submitted as unattended, its turn followed to the end, its answer
//! kept as a notification when the schedule says so, and its outcome written down again.

use super::clock::Clock;
use super::state::{self, InFlight, ScheduleState, StateError, StateFile};
use super::timing::{
    RUN_SESSION_RANDOM_BYTES, from_timestamp, latest_due, new_session_name, next_at_start,
    timestamp,
};
use super::{Paths, Spec, info};
use crate::api::{ApiFailure, Backend};
use crate::config::Missed;
use crate::meter::ScheduleRuns;
use bxcore::{SessionId, TurnEnd};
use chrono::{DateTime, Utc};
use proto::api::{RunOutcome, RunTrigger, ScheduleInfo, ScheduleList, ScheduleRun};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// Why a run due while the previous one goes is skipped.
pub const STILL_RUNNING: &str = "the previous run still goes";
/// Why runs missed while loopd was down did not run (`missed = "skip"`).
pub const MISSED_WHILE_DOWN: &str = "it fell due while loopd was down (missed = \"skip\")";

/// What the scheduler's runs did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCounts {
    /// Runs whose task was submitted.
    pub started: u64,
    /// Runs that ended (their turn ended, or they could not start).
    pub finished: u64,
    /// Runs that ended in a notification.
    pub notified: u64,
    /// Due runs skipped because the previous run still went.
    pub skipped: u64,
    /// Runs a crash cut that the start submitted again, counted once that submission was
    /// answered (and the catch-up that follows one that had run, begun).
    pub resumed: u64,
}

pub(super) struct Entry {
    pub(super) spec: Spec,
    pub(super) state: ScheduleState,
    /// When it runs next by itself (paused or not); `None` when disabled or never again.
    pub(super) next_due: Option<DateTime<Utc>>,
    pub(super) running: bool,
}

/// What the start has to start besides the scheduler's task.
pub(super) enum AtStart {
    /// A catch-up run (`missed = "run_once"`): the schedule's name and the due time.
    CatchUp(String, DateTime<Utc>),
    /// The run a crash cut, to submit again; then, unless it runs now (it had run before the
    /// crash, or cannot run), the catch-up due at `catch_up`: `run_once` runs one run at start.
    Resume {
        /// The schedule's name.
        name: String,
        /// The run.
        flight: InFlight,
        /// The catch-up's due time, when `missed = "run_once"` and runs were missed.
        catch_up: Option<DateTime<Utc>>,
    },
}

/// What the scheduler's task and its runs share.
pub(super) struct Shared<B> {
    pub(super) backend: Arc<B>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) paths: Paths,
    entries: Mutex<BTreeMap<String, Entry>>,
    /// The states of schedules no longer configured, kept in the file.
    others: BTreeMap<String, ScheduleState>,
    /// Serialises writes of the state file, so the last write holds the latest state.
    writes: Mutex<()>,
    /// Wakes the scheduler's task when a schedule's flag changed.
    wake: Notify,
    pub(super) counts: watch::Sender<RunCounts>,
    pub(super) runs: Mutex<Vec<JoinHandle<()>>>,
    /// Where each run's end is counted (`loopd_schedule_runs_total`).
    pub(super) ended: ScheduleRuns,
}

impl<B: Backend> Shared<B> {
    /// The scheduler over `specs` with the state at `paths.state`, and what to start with it:
    /// the runs a crash cut, to submit again, and the catch-up runs (`missed = "run_once"`).
    pub(super) fn load(
        backend: Arc<B>,
        specs: Vec<Spec>,
        paths: Paths,
        clock: Arc<dyn Clock>,
        runs: ScheduleRuns,
    ) -> Result<(Shared<B>, Vec<AtStart>), StateError> {
        let mut file = state::load(&paths.state)?;
        let now = clock.now();
        let mut at_start = Vec::new();
        let mut changed = false;
        let mut entries = BTreeMap::new();
        for spec in specs {
            let mut state = file.schedules.remove(&spec.name).unwrap_or_default();
            let resume = settle_cut_run(&spec, &mut state, &runs, &mut changed);
            // A schedule never run before starts from now: nothing is missed.
            let missed = state
                .last_due
                .as_ref()
                .and_then(from_timestamp)
                .filter(|_| spec.enabled)
                .and_then(|last| latest_due(&spec.timing, last, now));
            let mut catch_up = None;
            if let Some(missed) = missed {
                changed = true;
                state.last_due = Some(timestamp(missed));
                match spec.missed {
                    Missed::RunOnce if !state.paused => catch_up = Some(missed),
                    Missed::RunOnce => {}
                    Missed::Skip if state.paused => {}
                    Missed::Skip => {
                        tracing::info!(schedule = %spec.name, due = %missed, "missed while loopd was down: skipped");
                        runs.ended(&spec.name, SKIPPED);
                        state.last_run =
                            session_of(&spec, missed).ok().map(|session| ScheduleRun {
                                started: timestamp(now),
                                trigger: RunTrigger::Due,
                                session,
                                turn: None,
                                outcome: RunOutcome::Skipped {
                                    reason: MISSED_WHILE_DOWN.into(),
                                },
                            });
                    }
                }
            }
            let running = resume.is_some();
            match resume {
                Some(flight) => at_start.push(AtStart::Resume {
                    name: spec.name.clone(),
                    flight,
                    catch_up,
                }),
                None => {
                    if let Some(due) = catch_up {
                        at_start.push(AtStart::CatchUp(spec.name.clone(), due));
                    }
                }
            }
            // In phase with the last due time (an `every` schedule does not count from the
            // restart), and never that due time again (a clock set back since).
            let next_due = if spec.enabled {
                let last = state.last_due.as_ref().and_then(from_timestamp);
                next_at_start(&spec.timing, last, now)
            } else {
                None
            };
            entries.insert(
                spec.name.clone(),
                Entry {
                    spec,
                    state,
                    next_due,
                    running,
                },
            );
        }
        let shared = Shared {
            backend,
            clock,
            paths,
            entries: Mutex::new(entries),
            others: file.schedules,
            writes: Mutex::new(()),
            wake: Notify::new(),
            counts: watch::Sender::new(RunCounts::default()),
            runs: Mutex::new(Vec::new()),
            ended: runs,
        };
        // Only what start changed is written: a loopd with a full disk and nothing missed
        // still serves. One that cannot write what it settled finds the same at its next
        // start (a catch-up run is written down before it runs, or does not run).
        if changed && let Err(e) = shared.persist() {
            tracing::warn!(error = %e, "cannot write the missed runs settled at start");
        }
        Ok((shared, at_start))
    }

    pub(super) fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn count(&self) -> usize {
        self.lock().len()
    }

    #[cfg(test)]
    pub(super) fn counts(&self) -> watch::Receiver<RunCounts> {
        self.counts.subscribe()
    }

    /// Writes every state, durably (blocking: a file and two fsyncs).
    fn persist(&self) -> Result<(), StateError> {
        let _one_writer = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = StateFile {
            schedules: self.others.clone(),
        };
        for (name, entry) in self.lock().iter() {
            file.schedules.insert(name.clone(), entry.state.clone());
        }
        state::save(&self.paths.state, &file)
    }

    /// [`Shared::persist`] off the async threads.
    pub(super) async fn persist_async(self: &Arc<Self>) -> Result<(), StateError> {
        let shared = Arc::clone(self);
        match tokio::task::spawn_blocking(move || shared.persist()).await {
            Ok(written) => written,
            Err(e) => Err(StateError::Corrupt {
                path: self.paths.state.clone(),
                why: format!("the write's task failed: {e}"),
            }),
        }
    }

    pub(super) fn list(&self) -> ScheduleList {
        let schedules = self
            .lock()
            .values()
            .map(|e| info(&e.spec, &e.state, e.next_due))
            .collect();
        ScheduleList { schedules }
    }

    pub(super) fn pause(&self, name: &str, paused: bool) -> Result<ScheduleInfo, ApiFailure> {
        {
            let mut entries = self.lock();
            let entry = entries.get_mut(name).ok_or_else(|| not_found(name))?;
            entry.state.paused = paused;
        }
        self.persist().map_err(|e| state_failure(&e))?;
        self.wake.notify_one();
        tracing::info!(schedule = name, paused, "schedule flag set");
        let entries = self.lock();
        let entry = entries.get(name).ok_or_else(|| not_found(name))?;
        Ok(info(&entry.spec, &entry.state, entry.next_due))
    }

    /// The earliest time a schedule falls due.
    fn next_wake(&self) -> Option<DateTime<Utc>> {
        self.lock().values().filter_map(|e| e.next_due).min()
    }

    /// Starts or skips every run due by now.
    fn fire_due(self: &Arc<Self>) {
        let now = self.clock.now();
        let mut due_now = Vec::new();
        let mut skipped = false;
        {
            let mut entries = self.lock();
            for (name, entry) in entries.iter_mut() {
                let Some(next) = entry.next_due.filter(|next| *next <= now) else {
                    continue;
                };
                // Due times passed all at once (a suspended machine) count as the latest.
                let due = latest_due(&entry.spec.timing, next, now).unwrap_or(next);
                entry.next_due = entry.spec.timing.next_after(due);
                if entry.state.paused {
                    entry.state.last_due = Some(timestamp(due));
                } else if entry.running {
                    tracing::info!(schedule = %name, "skipped: {STILL_RUNNING}");
                    self.ended.ended(name, SKIPPED);
                    entry.state.last_due = Some(timestamp(due));
                    if let Ok(session) = session_of(&entry.spec, due) {
                        entry.state.last_run = Some(ScheduleRun {
                            started: timestamp(now),
                            trigger: RunTrigger::Due,
                            session,
                            turn: None,
                            outcome: RunOutcome::Skipped {
                                reason: STILL_RUNNING.into(),
                            },
                        });
                    }
                    skipped = true;
                } else {
                    due_now.push((name.clone(), due));
                }
            }
        }
        if skipped {
            if let Err(e) = self.persist() {
                tracing::warn!(error = %e, "cannot write the schedules' state");
            }
            self.counts.send_modify(|c| c.skipped += 1);
        }
        for (name, due) in due_now {
            self.start_due(&name, due, RunTrigger::Due);
        }
    }

    pub(super) fn abort_runs(&self) {
        for run in self
            .runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            run.abort();
        }
    }
}

/// The scheduler's task: sleeps until the next due time (or a flag changes, or it is told to
/// stop), then starts or skips what is due.
pub(super) async fn drive<B: Backend>(shared: Arc<Shared<B>>, mut stop: watch::Receiver<bool>) {
    loop {
        let woken = shared.wake.notified();
        let sleep = async {
            match shared.next_wake() {
                Some(t) => shared.clock.sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break,
            _ = woken => continue,
            _ = sleep => {}
        }
        shared.fire_due();
    }
}

/// What becomes at start of the run a crash cut (`state.in_flight`, written down before its
/// task was submitted): returned, to be submitted again, when its schedule still runs by
/// itself (enabled, not paused): its task id makes that run it at most once. Otherwise, and
/// for a run left `running` by a loopd from before runs were kept in flight, the run is
/// ended `interrupted` (its turn, if it had one, was ended so when loopd stopped).
fn settle_cut_run(
    spec: &Spec,
    state: &mut ScheduleState,
    runs: &ScheduleRuns,
    changed: &mut bool,
) -> Option<InFlight> {
    let had = state.in_flight.take();
    let resume = had.clone().filter(|_| spec.enabled && !state.paused);
    if let Some(flight) = &resume {
        tracing::info!(schedule = %spec.name, task_id = %flight.task_id, session = %flight.session, "a run cut by a crash: submitting it again");
        state.in_flight = resume.clone();
    } else if had.is_some() {
        *changed = true;
    }
    let is_resumed = |run: &ScheduleRun| {
        resume
            .as_ref()
            .is_some_and(|f| f.started == run.started && f.session == run.session)
    };
    if let Some(run) = state.last_run.as_mut()
        && run.outcome == RunOutcome::Running
        && !is_resumed(run)
    {
        run.outcome = RunOutcome::Ended {
            end: TurnEnd::Interrupted,
            notified: false,
            not_approved: 0,
        };
        // The loopd it ran in never counted its end.
        runs.ended(&spec.name, outcome_word(&run.outcome));
        *changed = true;
    }
    resume
}

/// The session of a run of `spec` due at `due`: its fixed one, or a new one nobody can name
/// before (random digits from the OS).
pub(super) fn session_of(spec: &Spec, due: DateTime<Utc>) -> Result<SessionId, ApiFailure> {
    let Some(id) = &spec.session else {
        let no_session = |why: String| {
            ApiFailure::Internal(format!(
                "schedule {}: no session for its run: {why}",
                spec.name
            ))
        };
        let mut random = [0u8; RUN_SESSION_RANDOM_BYTES];
        getrandom::fill(&mut random).map_err(|e| no_session(format!("no randomness: {e}")))?;
        return SessionId::new(&new_session_name(&spec.name, due, random))
            .map_err(|e| no_session(e.to_string()));
    };
    Ok(id.clone())
}

/// `loopd_schedule_runs_total`'s outcome of a run skipped.
const SKIPPED: &str = "skipped";

/// `loopd_schedule_runs_total`'s outcome of a run that ended `outcome`: its turn's end
/// (`done`, `failed`, `interrupted`, ...), `skipped`, or `not_started` when it could not start.
pub(super) fn outcome_word(outcome: &RunOutcome) -> &'static str {
    match outcome {
        RunOutcome::Ended { end, .. } => crate::meter::metrics::end_word(end),
        RunOutcome::Skipped { .. } => SKIPPED,
        RunOutcome::Failed { .. } => "not_started",
        // Not an end: a run counted while it reads running had its end go unseen, as one a
        // stopped loopd left running (docs/metrics.md lists no `running`).
        RunOutcome::Running => "interrupted",
    }
}

pub(super) fn not_found(name: &str) -> ApiFailure {
    ApiFailure::NotFound(format!("no schedule named {name:?}"))
}

pub(super) fn state_failure(e: &StateError) -> ApiFailure {
    if e.is_disk_full() {
        ApiFailure::InsufficientStorage(format!("disk full: {e}"))
    } else {
        ApiFailure::Internal(format!("cannot write the schedules' state: {e}"))
    }
}
