//! A task queued on its session's lane: the one way tasks reach the engine, attended (a
//! client's) or not (a schedule's run).

use super::lane::{Pending, Work};
use super::{Engine, task_ids, waiting};
use crate::api::{ApiFailure, Submitted};
use crate::meter::Refusal;
use bxcore::SessionId;
use proto::api::TaskRequest;
use std::sync::atomic::Ordering;
use tokio::sync::oneshot;

/// How a task is submitted.
#[derive(Debug, Clone, Copy)]
pub(super) struct How {
    /// Nobody watches its turn (a schedule's run).
    unattended: bool,
    /// Its session must not exist yet (a schedule's `session = "new"` run).
    new_session: bool,
}

impl How {
    /// A client's task.
    pub(super) const ATTENDED: How = How {
        unattended: false,
        new_session: false,
    };
    /// A schedule's run into its fixed session.
    pub(super) const UNATTENDED: How = How {
        unattended: true,
        new_session: false,
    };
    /// A schedule's run into a session of its own.
    pub(super) const UNATTENDED_NEW: How = How {
        unattended: true,
        new_session: true,
    };
}

impl Engine {
    /// Queues `task` (see [`crate::api::Backend::submit`]) as `how` says. A refusal the
    /// metrics count (`loopd_tasks_refused_total`) is counted here, whatever step refused it.
    pub(super) async fn submit_task(
        &self,
        task: TaskRequest,
        how: How,
    ) -> Result<Submitted, ApiFailure> {
        let submitted = self.queue_task(task, how).await;
        if let Err(why) = &submitted
            && let Some(refusal) = refusal(why)
        {
            self.inner.parts.meter.task_refused(refusal);
        }
        submitted
    }

    async fn queue_task(&self, task: TaskRequest, how: How) -> Result<Submitted, ApiFailure> {
        if self.inner.shutting_down.load(Ordering::SeqCst) {
            return Err(ApiFailure::Unavailable("loopd is shutting down".into()));
        }
        if task.text.trim().is_empty() {
            return Err(ApiFailure::BadRequest(
                "the task's text is empty: say what the task is".into(),
            ));
        }
        if let Some(why) = proto::api::overheard_problem(&task.overheard) {
            return Err(ApiFailure::BadRequest(why));
        }
        let id = match (task.session, &task.task_id) {
            (Some(id), _) => id,
            (None, Some(task_id)) => proto::api::task_session(task_id)
                .map_err(|e| ApiFailure::BadRequest(format!("task_id {task_id}: {e}")))?,
            (None, None) => self.new_session_id()?,
        };
        let named = match task.task_id {
            None => None,
            Some(task_id) => match task_ids::Live::find_or_add(&self.inner.named, &id, task_id) {
                task_ids::Found::Live(first) => return task_ids::follow(first).await,
                task_ids::Found::New(ticket) => Some(ticket),
            },
        };
        // The day's budget spent: refused now (a repeat of a task still waiting or running
        // follows it above), not after waiting for a slot. A named task of a session that
        // exists is not refused here: it may have run already, and only its session's log
        // says so (the worker reads it, answers a repeat with its turn, and refuses a new one
        // for the day then). Without the session it never ran, and nothing is written for it.
        let may_have_run = named.is_some() && self.inner.parts.store.exists(&id);
        if !may_have_run && let Some(why) = self.inner.day_refusal() {
            if let Some(ticket) = &named {
                ticket.refused(&why);
            }
            return Err(why);
        }
        let max_waiting = self.inner.parts.cfg.api.max_waiting_tasks;
        let waiting = match waiting::Waiters::take(&self.inner.waiters, max_waiting) {
            Ok(waiting) => waiting,
            Err(why) => {
                if let Some(ticket) = &named {
                    ticket.refused(&why);
                }
                return Err(why);
            }
        };
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            text: task.text,
            overheard: task.overheard,
            reply,
            named,
            waiting,
            unattended: how.unattended,
            new_session: how.new_session,
        };
        if how.new_session {
            self.queue_new(&id, pending)?;
        } else {
            self.queue(&id, Work::Task(pending))?;
        }
        answer.await.map_err(|_| {
            ApiFailure::Internal("the task was dropped before its turn started".into())
        })?
    }
}

impl Engine {
    /// Queues `pending` on session `id` only if no session `id` exists and nothing is queued
    /// for it: checked and queued under the lanes' lock, so that a client who learnt the id
    /// (`GET /v1/schedules` shows a run's session as it starts) and sent a task to it first
    /// cannot have a schedule's run appended to the session it made. A named task (a run
    /// submitted again after a crash, with its task id) is queued into a session that exists
    /// and is idle: it may be its own, made before the crash. The worker, holding the session,
    /// answers it from its user record there, runs it in a session that holds no task, and
    /// refuses it, as here, in one that holds another's (`worker::foreground`).
    fn queue_new(&self, id: &SessionId, pending: Pending) -> Result<(), ApiFailure> {
        let mut lanes = self.inner.lock_lanes();
        let exists = self.inner.parts.store.exists(id);
        if lanes.contains_key(id) || (exists && pending.named.is_none()) {
            drop(lanes);
            let why = made_before(id);
            pending.refuse(why.clone());
            return Err(why);
        }
        self.queue_locked(&mut lanes, id, Work::Task(pending))
    }
}

/// Why a run into a new session does not go into session `id`.
pub(super) fn made_before(id: &SessionId) -> ApiFailure {
    ApiFailure::Forbidden(format!(
        "session {id} exists already, and a run into a new session never goes into one made \
         before it; nothing was run"
    ))
}

/// The refusal `loopd_tasks_refused_total` counts a failure as, if it is one.
fn refusal(why: &ApiFailure) -> Option<Refusal> {
    match why {
        ApiFailure::Busy(_) => Some(Refusal::Busy),
        ApiFailure::TooManyWaiting(_) => Some(Refusal::TooManyWaiting),
        ApiFailure::OverBudget(_) => Some(Refusal::DayBudget),
        _ => None,
    }
}
