//! One run of a schedule: begun (marked running, in flight with its task id), written down
//! before its task is submitted (as unattended: nobody is at a terminal), its turn followed to
//! its end, its answer kept as a notification when the schedule says so, and its outcome
//! written down. A run a crash cut is submitted again at the next start (`resume`) as the
//! same task: the engine runs it if it never got there, and answers from the session's log if
//! it did.

use super::answer::{Answer, notification_text};
use super::runner::{STILL_RUNNING, Shared, not_found, outcome_word, session_of, state_failure};
use super::state::InFlight;
use super::timing::{run_task_id, timestamp};
use crate::api::{ApiFailure, Backend, Submitted};
use crate::config::TaskSource;
use crate::journal;
use bxcore::{Labels, SessionId, TaskId};
use chrono::{DateTime, Utc};
use proto::api::{Notification, RunOutcome, RunTrigger, ScheduleRun, ScheduleStarted, TaskRequest};
use std::sync::Arc;
use tokio::sync::oneshot;

/// A run begun: marked running in memory, to be written down and submitted.
struct Begun {
    name: String,
    session: SessionId,
    /// Its session is one of its own (`session = "new"`), which must not exist yet.
    new_session: bool,
    task: TaskSource,
    started: bxcore::Timestamp,
    /// Its task's id: the engine runs it at most once in its session.
    task_id: TaskId,
}

impl<B: Backend> Shared<B> {
    /// Starts a run of `name` due at `due` on a task of its own.
    pub(super) fn start_due(self: &Arc<Self>, name: &str, due: DateTime<Utc>, trigger: RunTrigger) {
        let begun = match self.begin(name, Some(due), trigger) {
            Ok(begun) => begun,
            Err(why) => {
                tracing::info!(schedule = name, "not started: {why}");
                return;
            }
        };
        let shared = Arc::clone(self);
        let run = tokio::spawn(async move {
            if let Ok((_, submitted)) = shared.launch(&begun, trigger).await {
                shared.follow(begun, submitted).await;
            }
        });
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.retain(|run| !run.is_finished());
        runs.push(run);
    }

    /// Submits again the run of `name` a crash cut (`flight`), as the same task into the same
    /// session, and follows it; then, unless it runs now, the catch-up due at `catch_up`
    /// (`missed = "run_once"` runs one run at start: the cut one, when it runs now). The
    /// schedule was marked running when it was loaded.
    pub(super) fn resume(
        self: &Arc<Self>,
        name: &str,
        flight: InFlight,
        catch_up: Option<DateTime<Utc>>,
    ) {
        let Some(task) = self.lock().get(name).map(|e| e.spec.task.clone()) else {
            return;
        };
        let trigger = flight.trigger;
        let begun = Begun {
            name: name.to_string(),
            session: flight.session,
            new_session: flight.new_session,
            task,
            started: flight.started,
            task_id: flight.task_id,
        };
        let shared = Arc::clone(self);
        let run = tokio::spawn(async move {
            let name = begun.name.clone();
            let runs_now = match shared.launch(&begun, trigger).await {
                // Answered with its end: it ran before the crash, and does not again.
                Ok((_, submitted)) if submitted.accepted.end.is_some() => {
                    shared.follow(begun, submitted).await;
                    false
                }
                Ok((_, submitted)) => {
                    shared.counts.send_modify(|c| c.resumed += 1);
                    shared.follow(begun, submitted).await;
                    return;
                }
                Err(_) => false,
            };
            if !runs_now && let Some(due) = catch_up {
                shared.start_due(&name, due, RunTrigger::CatchUp);
            }
            shared.counts.send_modify(|c| c.resumed += 1);
        });
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.retain(|run| !run.is_finished());
        runs.push(run);
    }

    /// Runs `name` now. The run goes on in a task of its own whatever becomes of the caller
    /// (a client that hangs up drops the HTTP handler awaiting this): the schedule is marked
    /// running until the run itself ends, never left so by a dropped future.
    pub(super) async fn run_now(
        self: &Arc<Self>,
        name: &str,
    ) -> Result<ScheduleStarted, ApiFailure> {
        let begun = self.begin(name, None, RunTrigger::Manual)?;
        let (started_tx, started) = oneshot::channel();
        let shared = Arc::clone(self);
        let run = tokio::spawn(async move {
            match shared.launch(&begun, RunTrigger::Manual).await {
                Ok((started, submitted)) => {
                    let _ = started_tx.send(Ok(started));
                    shared.follow(begun, submitted).await;
                }
                Err(why) => {
                    let _ = started_tx.send(Err(why));
                }
            }
        });
        self.runs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(run);
        started.await.unwrap_or_else(|_| {
            Err(ApiFailure::Unavailable(
                "the run's task ended before it started (loopd is stopping)".into(),
            ))
        })
    }

    /// Marks a run of `name` running (due at `due`, or now for a manual run), in memory.
    fn begin(
        &self,
        name: &str,
        due: Option<DateTime<Utc>>,
        trigger: RunTrigger,
    ) -> Result<Begun, ApiFailure> {
        let now = self.clock.now();
        let mut entries = self.lock();
        let entry = entries.get_mut(name).ok_or_else(|| not_found(name))?;
        if entry.running {
            return Err(ApiFailure::Busy(format!(
                "schedule {name:?} cannot run now: {STILL_RUNNING}"
            )));
        }
        let session = session_of(&entry.spec, due.unwrap_or(now))?;
        let task_id = run_task_id(name, trigger, due.unwrap_or(now)).map_err(|e| {
            ApiFailure::Internal(format!("schedule {name}: no task id for its run: {e}"))
        })?;
        let started = timestamp(now);
        entry.running = true;
        if let Some(due) = due {
            entry.state.last_due = Some(timestamp(due));
        }
        entry.state.last_run = Some(ScheduleRun {
            started,
            trigger,
            session: session.clone(),
            turn: None,
            outcome: RunOutcome::Running,
        });
        let new_session = entry.spec.session.is_none();
        entry.state.in_flight = Some(InFlight {
            task_id: task_id.clone(),
            session: session.clone(),
            new_session,
            started,
            trigger,
        });
        Ok(Begun {
            name: name.to_string(),
            session,
            new_session,
            task: entry.spec.task.clone(),
            started,
            task_id,
        })
    }

    /// Writes the run down, reads its task and submits it with the run's task id; a run that
    /// cannot start is recorded as failed.
    async fn launch(
        self: &Arc<Self>,
        begun: &Begun,
        trigger: RunTrigger,
    ) -> Result<(ScheduleStarted, Submitted), ApiFailure> {
        // Before the task is submitted: a loopd killed from here on submits it again at its
        // next start, with the same task id, which the engine runs at most once.
        if let Err(e) = self.persist_async().await {
            tracing::warn!(schedule = %begun.name, error = %e, "not run: its start cannot be written down");
            // Nothing ran; the state on disk is the one before, and in memory it reads failed
            // (not running).
            self.end_run(
                begun,
                None,
                RunOutcome::Failed {
                    reason: e.to_string(),
                },
                true,
            );
            return Err(state_failure(&e));
        }
        let started = async {
            let text = match &begun.task {
                TaskSource::Text(text) => text.clone(),
                TaskSource::File(path) => tokio::fs::read_to_string(path).await.map_err(|e| {
                    ApiFailure::Internal(format!("cannot read {}: {e}", path.display()))
                })?,
            };
            let task = TaskRequest {
                session: Some(begun.session.clone()),
                text,
                task_id: Some(begun.task_id.clone()),
                overheard: Vec::new(),
            };
            // A new session is made by this run or the run does not go: a client that saw
            // its id (`GET /v1/schedules` shows it from now) cannot have made it first. The
            // run's own task, submitted again after a crash, is answered from it.
            if begun.new_session {
                self.backend.submit_unattended_new(task).await
            } else {
                self.backend.submit_unattended(task).await
            }
        }
        .await;
        let submitted = match started {
            Ok(submitted) => submitted,
            Err(why) => {
                tracing::warn!(schedule = %begun.name, error = %why, "the run could not start");
                let outcome = RunOutcome::Failed {
                    reason: why.to_string(),
                };
                self.end_run(begun, None, outcome, true);
                // Ended: not submitted again at the next start.
                if let Err(e) = self.persist_async().await {
                    tracing::warn!(schedule = %begun.name, error = %e, "cannot write the schedules' state");
                }
                self.counts.send_modify(|c| c.finished += 1);
                return Err(why);
            }
        };
        let turn = submitted.accepted.turn;
        tracing::info!(schedule = %begun.name, ?trigger, session = %begun.session, turn, "run started");
        self.update_run(begun, |run| run.turn = Some(turn));
        if let Err(e) = self.persist_async().await {
            tracing::warn!(schedule = %begun.name, error = %e, "cannot write the schedules' state");
        }
        self.counts.send_modify(|c| c.started += 1);
        let started = ScheduleStarted {
            name: begun.name.clone(),
            session: submitted.accepted.session.clone(),
            turn,
        };
        Ok((started, submitted))
    }

    /// Follows the run's turn to its end, keeps its notification, writes its outcome down. A
    /// turn answered from the session's log (the run's task ran before a crash) is not
    /// notified again: its answer is not in the answer, and a notification may have been kept.
    async fn follow(self: &Arc<Self>, begun: Begun, mut submitted: Submitted) {
        let from_log = submitted.accepted.end.is_some();
        let mut answer = Answer::default();
        while let Some(event) = submitted.events.recv().await {
            answer.push(&event);
        }
        let turn = submitted.accepted.turn;
        let (notify, quiet, notify_to) = {
            let entries = self.lock();
            match entries.get(&begun.name) {
                Some(e) => (
                    e.spec.notify,
                    e.spec.quiet_reply.clone(),
                    e.spec.notify_to.clone(),
                ),
                None => return,
            }
        };
        let text = if from_log {
            None
        } else {
            notification_text(
                &begun.name,
                &answer.text,
                answer.end.as_ref(),
                quiet.as_deref(),
                notify,
            )
        };
        let notified = match text {
            None => false,
            Some(text) => {
                // The answer is the model's text; what it could repeat is the context it was
                // made in.
                let labels = Labels::derived(Labels::PUBLIC, answer.labels);
                let note = Notification {
                    time: bxcore::Timestamp::now(),
                    session: begun.session.clone(),
                    turn,
                    text,
                    class: labels.class,
                    untrusted: labels.untrusted,
                    to: notify_to,
                };
                let file = self.paths.notifications.clone();
                match tokio::task::spawn_blocking(move || journal::append(&file, &[note])).await {
                    Ok(Ok(())) => true,
                    Ok(Err(e)) => {
                        tracing::warn!(schedule = %begun.name, error = %e, "cannot keep the notification");
                        false
                    }
                    Err(e) => {
                        tracing::warn!(schedule = %begun.name, error = %e, "the notification's task failed");
                        false
                    }
                }
            }
        };
        let outcome = match answer.end {
            Some(end) => RunOutcome::Ended {
                end,
                notified,
                not_approved: answer.not_approved,
            },
            None => RunOutcome::Failed {
                reason: "the turn's events ended without its end".into(),
            },
        };
        tracing::info!(schedule = %begun.name, turn, ?outcome, "run ended");
        self.end_run(&begun, Some(turn), outcome, true);
        if let Err(e) = self.persist_async().await {
            tracing::warn!(schedule = %begun.name, error = %e, "cannot write the schedules' state");
        }
        self.counts.send_modify(|c| {
            c.finished += 1;
            c.notified += u64::from(notified);
        });
    }

    /// Changes the run's record, if it is still the schedule's last run.
    fn update_run(&self, begun: &Begun, change: impl FnOnce(&mut ScheduleRun)) {
        let mut entries = self.lock();
        if let Some(run) = entries
            .get_mut(&begun.name)
            .and_then(|e| e.state.last_run.as_mut())
            .filter(|run| run.started == begun.started && run.session == begun.session)
        {
            change(run);
        }
    }

    /// The run is over: not running, not in flight, its outcome recorded (when `record`, and it
    /// is still the last run: a skipped run after it stays the last).
    fn end_run(&self, begun: &Begun, turn: Option<u64>, outcome: RunOutcome, record: bool) {
        self.ended.ended(&begun.name, outcome_word(&outcome));
        if record {
            self.update_run(begun, |run| {
                run.turn = turn.or(run.turn);
                run.outcome = outcome;
            });
        }
        if let Some(entry) = self.lock().get_mut(&begun.name) {
            entry.running = false;
            if entry
                .state
                .in_flight
                .as_ref()
                .is_some_and(|f| f.task_id == begun.task_id && f.session == begun.session)
            {
                entry.state.in_flight = None;
            }
        }
    }
}
