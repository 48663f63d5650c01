//! The engine: runs tasks as turns, one at a time per session and in order, different
//! sessions concurrently up to the number of main slots; answers the API (`Backend`).
//!
//! Each session with work has a lane: a bounded queue of waiting tasks and, while a turn runs,
//! its `Stop`. A worker of the fixed pool (`pool`) takes a lane with work, opens the session
//! (taking its hold, or the one kept open: `idle`), writes the
//! task's user record (then acknowledges it), runs the turn on a main slot, gives the main slot
//! back, does the turn's background work (summaries, compaction) on the background slot, and
//! takes the next task. The lane stays busy through the background work: one writer per log.

pub(crate) mod approvals;
mod compact;
mod fork;
mod tool_source;
pub use tool_source::ToolSource;
mod day;
mod idle;
mod lane;
mod metrics;
mod pool;
mod status;
mod submit;
mod task_ids;
#[cfg(test)]
mod tests;
mod undo;
mod unwind;
mod waiting;
mod worker;

use crate::api::{ApiFailure, Backend, MAX_PAGE_RECORDS, Submitted, UsageQuery};
use crate::blocking::{Blocking, OnRuntimeThread};
use crate::config::Config;
use crate::meter::Meter;
use crate::route::{Lease, Router};
use crate::schedule::Scheduler;
use crate::session::{Store, StoreError};
use crate::tools::ToolPort;
use bxcore::{ApprovalId, SessionId, TurnEvent};
use lane::{Lane, Work};
use proto::api::{
    ApprovalAnswer, ApprovalAnswered, ApprovalList, CancelAnswer, CompactAnswer, MemoryList,
    NotificationList, RecordsPage, SessionInfo, SessionList, Status, TaskRequest,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, broadcast, oneshot};

/// Everything the engine runs turns with.
pub struct EngineParts {
    /// loopd's config.
    pub cfg: Config,
    /// The sessions.
    pub store: Store,
    /// The model servers, and where each session's calls go.
    pub models: Arc<Router>,
    /// Tools that loopd does not answer itself.
    pub port: Arc<dyn ToolPort>,
    /// Where each task's registry comes from.
    pub tools: ToolSource,
    /// The system prompt.
    pub system: String,
    /// How turn threads wait for async work (the clients, a main or background slot), on
    /// the runtime the API runs on.
    pub blocking: Blocking,
    /// The metrics and usage accounts every task reports to.
    pub meter: Arc<Meter>,
}

/// The engine; cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

struct Inner {
    parts: EngineParts,
    lanes: Mutex<HashMap<SessionId, Lane>>,
    started: Instant,
    shutting_down: AtomicBool,
    /// Read by a worker from its last look at `shutting_down` until its task's user record is
    /// written; written by shutdown to set the flag, so no user record is begun after it.
    starting: RwLock<()>,
    /// The tasks their clients named that wait or run now.
    named: Arc<task_ids::Live>,
    /// Counter for the ids of new sessions.
    new_ids: AtomicU64,
    /// Lanes with work, waiting for a turn worker.
    ready: Arc<pool::Ready>,
    /// How many turn workers started (at the first task), or why they could not.
    workers: std::sync::OnceLock<Result<usize, String>>,
    /// Sessions kept open between their tasks.
    idle: idle::IdleSessions,
    /// The tasks waiting now, across all sessions.
    waiters: Arc<waiting::Waiters>,
    /// Notified each time a worker ends.
    worker_done: Notify,
    /// The calls waiting for the owner's approval, across sessions.
    approvals: approvals::Desk,
    /// The schedules, once the daemon started them (`set_scheduler`); taken at shutdown.
    scheduler: Mutex<Option<Arc<Scheduler<Engine>>>>,
}

impl Engine {
    /// An engine over `parts`. Turns of different sessions run concurrently up to one per
    /// main slot of the endpoints (`route`); a session waits for its own slot.
    pub fn new(parts: EngineParts) -> Engine {
        Engine {
            inner: Arc::new(Inner {
                parts,
                lanes: Mutex::new(HashMap::new()),
                started: Instant::now(),
                shutting_down: AtomicBool::new(false),
                starting: RwLock::new(()),
                named: Arc::default(),
                new_ids: AtomicU64::new(0),
                waiters: Arc::default(),
                idle: idle::IdleSessions::default(),
                ready: Arc::default(),
                workers: std::sync::OnceLock::new(),
                worker_done: Notify::new(),
                approvals: approvals::Desk::default(),
                scheduler: Mutex::new(None),
            }),
        }
    }

    /// The model servers and where each session's calls go.
    pub fn models(&self) -> &Arc<Router> {
        &self.inner.parts.models
    }

    /// Stops taking tasks (a new one is [`ApiFailure::Unavailable`], and no user record is
    /// begun from now on), refuses the queued ones alike, tells running turns to stop (they
    /// end as `interrupted` and send their `ended` event), waits up to `grace_ms` for them
    /// to record their end, then writes the usage accounts a last time.
    pub async fn shutdown(&self, grace_ms: u64) {
        let inner = Arc::clone(&self.inner);
        // Off the async threads: a worker may be writing its user record (one fsync).
        let closed = tokio::task::spawn_blocking(move || {
            let _no_starts = inner.starting.write().unwrap_or_else(|p| p.into_inner());
            inner.shutting_down.store(true, Ordering::SeqCst);
        })
        .await;
        if closed.is_err() {
            self.inner.shutting_down.store(true, Ordering::SeqCst);
        }
        {
            let mut lanes = self.inner.lock_lanes();
            for lane in lanes.values_mut() {
                lane.stop_all("loopd is shutting down", true);
            }
        }
        let deadline = Instant::now() + Duration::from_millis(grace_ms);
        loop {
            let notified = self.inner.worker_done.notified();
            if self.inner.running() == 0 {
                // Every session is closed: its log's lock and this process's hold let go.
                self.inner.idle.close_all();
                self.save_accounts().await;
                return;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                tracing::warn!(
                    running = self.inner.running(),
                    "turns still running at the end of the grace period"
                );
                self.inner.idle.close_all();
                self.save_accounts().await;
                return;
            };
            let _ = tokio::time::timeout(left, notified).await;
        }
    }

    /// Answers the schedule routes from `scheduler` from now on.
    pub(crate) fn set_scheduler(&self, scheduler: Arc<Scheduler<Engine>>) {
        *self.inner.lock_scheduler() = Some(scheduler);
    }

    /// The scheduler, taken out (to stop it): the schedule routes find none from now on.
    pub(crate) fn take_scheduler(&self) -> Option<Arc<Scheduler<Engine>>> {
        self.inner.lock_scheduler().take()
    }

    fn scheduler(&self) -> Option<Arc<Scheduler<Engine>>> {
        self.inner.lock_scheduler().clone()
    }

    /// A new session id: `t-<unix seconds>-<n>`, not yet used.
    fn new_session_id(&self) -> Result<SessionId, ApiFailure> {
        let now = bxcore::Timestamp::now().unix_seconds();
        loop {
            let n = self.inner.new_ids.fetch_add(1, Ordering::SeqCst) + 1;
            let id = SessionId::new(&format!("t-{now}-{n}"))
                .map_err(|e| ApiFailure::Internal(e.to_string()))?;
            if !self.inner.parts.store.exists(&id) && !self.inner.lock_lanes().contains_key(&id) {
                return Ok(id);
            }
        }
    }
}

impl Engine {
    /// Puts `work` on session `id`'s lane: behind what runs or waits there (a full queue is
    /// [`ApiFailure::Busy`]), or on a new worker when the lane is idle.
    fn queue(&self, id: &SessionId, work: Work) -> Result<(), ApiFailure> {
        self.queue_locked(&mut self.inner.lock_lanes(), id, work)
    }

    /// [`Engine::queue`] under the lanes' lock, taken by the caller: what it checked under
    /// the lock still holds.
    fn queue_locked(
        &self,
        lanes: &mut HashMap<SessionId, Lane>,
        id: &SessionId,
        work: Work,
    ) -> Result<(), ApiFailure> {
        let lane = lanes.entry(id.clone()).or_insert_with(Lane::new);
        if lane.is_busy() {
            lane.enqueue(work, self.inner.parts.cfg.api.session_queue_len, id)
        } else {
            let workers = self
                .inner
                .workers
                .get_or_init(|| {
                    pool::start(&self.inner, &self.inner.ready)
                        .map_err(|e| format!("cannot start the turn workers: {e}"))
                })
                .clone()
                .map_err(ApiFailure::Internal)?;
            let stop = lane.start();
            let job = pool::Job {
                id: id.clone(),
                first: work,
                stop,
            };
            // A lane waits here at most once and tasks are capped (`max_waiting_tasks`), so
            // only a flood of compactions asked for meets this bound: refused like a task,
            // the lane given back idle.
            let max = self.inner.parts.cfg.api.max_waiting_tasks + workers;
            self.inner.ready.push(job, max).map_err(|job| {
                let _ = lane.next();
                let why =
                    ApiFailure::TooManyWaiting("too many sessions wait for a turn worker".into());
                job.first.refuse(why.clone());
                why
            })
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last handle is gone: the turn workers end.
        self.ready.close();
    }
}

impl Inner {
    fn lock_scheduler(&self) -> std::sync::MutexGuard<'_, Option<Arc<Scheduler<Engine>>>> {
        self.scheduler.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_lanes(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Lane>> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits (blocking: from a turn worker) for `lease`'s slot; `None` if it cannot.
    fn permit(&self, lease: &Lease) -> Option<tokio::sync::OwnedSemaphorePermit> {
        let gate = Arc::clone(&lease.gate);
        self.parts
            .blocking
            .wait(async { Ok::<_, OnRuntimeThread>(gate.acquire_owned().await.ok()) })
            .ok()
            .flatten()
    }

    fn running(&self) -> usize {
        self.lock_lanes()
            .values()
            .filter(|l| l.is_running())
            .count()
    }

    fn known(&self, id: &SessionId) -> Result<(), ApiFailure> {
        if self.parts.store.exists(id) || self.lock_lanes().contains_key(id) {
            Ok(())
        } else {
            Err(ApiFailure::NotFound(format!("no session {id}")))
        }
    }
}

/// No schedule `name` (none run: the scheduler is not started, or stopped).
fn no_schedule(name: &str, shutting_down: bool) -> ApiFailure {
    if shutting_down {
        return ApiFailure::Unavailable("loopd is shutting down".into());
    }
    ApiFailure::NotFound(format!("no schedule named {name:?}"))
}

/// A store error as the API reports it.
fn store_failure(e: StoreError) -> ApiFailure {
    match e {
        StoreError::NotFound(id) => ApiFailure::NotFound(format!("no session {id}")),
        StoreError::Busy(_) => ApiFailure::Busy(e.to_string()),
        full if full.is_disk_full() => {
            ApiFailure::InsufficientStorage(format!("disk full: {full}"))
        }
        other => ApiFailure::Internal(other.to_string()),
    }
}

impl Backend for Engine {
    async fn submit(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
        self.submit_task(task, submit::How::ATTENDED).await
    }

    async fn submit_unattended(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
        self.submit_task(task, submit::How::UNATTENDED).await
    }

    async fn submit_unattended_new(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
        self.submit_task(task, submit::How::UNATTENDED_NEW).await
    }

    async fn undo(
        &self,
        id: &SessionId,
        asked: proto::UndoTurns,
    ) -> Result<proto::UndoAnswer, ApiFailure> {
        undo::ask(self, id, asked).await
    }

    async fn fork(
        &self,
        id: &SessionId,
        asked: proto::ForkRequest,
    ) -> Result<proto::ForkAnswer, ApiFailure> {
        fork::ask(self, id, asked).await
    }

    fn diff(&self, id: &SessionId, turn: Option<u64>) -> Result<proto::DiffAnswer, ApiFailure> {
        undo::diff(self, id, turn)
    }

    async fn compact(&self, id: &SessionId) -> Result<CompactAnswer, ApiFailure> {
        if self.inner.shutting_down.load(Ordering::SeqCst) {
            return Err(ApiFailure::Unavailable("loopd is shutting down".into()));
        }
        self.inner.known(id)?;
        let (reply, answer) = oneshot::channel();
        self.queue(id, Work::Compact(reply))?;
        answer
            .await
            .map_err(|_| ApiFailure::Internal("the compaction was dropped before it ran".into()))?
    }

    fn sessions(&self) -> Result<SessionList, ApiFailure> {
        // From the store's index: no log is read (issue 14).
        let summaries = self.inner.parts.store.summaries().map_err(store_failure)?;
        let lanes = self.inner.lock_lanes();
        let sessions = summaries
            .into_iter()
            .map(|(id, summary)| {
                let lane = lanes.get(&id);
                SessionInfo {
                    busy: lane.is_some_and(Lane::is_running),
                    queued: lane.map_or(0, |l| l.queued() as u64),
                    id,
                    last_turn: summary.last_turn,
                    records: summary.records,
                }
            })
            .collect();
        Ok(SessionList { sessions })
    }

    fn records(&self, id: &SessionId, from: u64, limit: u64) -> Result<RecordsPage, ApiFailure> {
        let records = self.inner.parts.store.read(id).map_err(store_failure)?;
        let limit = limit.clamp(1, MAX_PAGE_RECORDS);
        let start = (from as usize).min(records.len());
        let end = start.saturating_add(limit as usize).min(records.len());
        Ok(RecordsPage {
            session: id.clone(),
            from: start as u64,
            records: records[start..end].to_vec(),
            next: (end < records.len()).then_some(end as u64),
        })
    }

    fn follow(&self, id: &SessionId) -> Result<broadcast::Receiver<TurnEvent>, ApiFailure> {
        self.inner.known(id)?;
        let mut lanes = self.inner.lock_lanes();
        Ok(lanes
            .entry(id.clone())
            .or_insert_with(Lane::new)
            .subscribe())
    }

    fn cancel(&self, id: &SessionId) -> Result<CancelAnswer, ApiFailure> {
        self.inner.known(id)?;
        let mut lanes = self.inner.lock_lanes();
        let (cancelled, dropped) = match lanes.get_mut(id) {
            Some(lane) => lane.stop_all("cancelled before it started", false),
            None => (false, 0),
        };
        Ok(CancelAnswer {
            session: id.clone(),
            cancelled,
            dropped,
        })
    }

    fn approvals(&self) -> Result<ApprovalList, ApiFailure> {
        Ok(self.inner.approvals.list())
    }

    async fn answer_approval(
        &self,
        id: &ApprovalId,
        answer: ApprovalAnswer,
        uid: Option<u32>,
    ) -> Result<ApprovalAnswered, ApiFailure> {
        self.inner.approvals.answer(id, answer, uid).await
    }

    fn schedules(&self) -> Result<proto::api::ScheduleList, ApiFailure> {
        Ok(match self.scheduler() {
            Some(scheduler) => scheduler.list(),
            None => proto::api::ScheduleList {
                schedules: Vec::new(),
            },
        })
    }

    async fn run_schedule(&self, name: &str) -> Result<proto::api::ScheduleStarted, ApiFailure> {
        match self.scheduler() {
            Some(scheduler) => scheduler.run_now(name).await,
            None => Err(no_schedule(
                name,
                self.inner.shutting_down.load(Ordering::SeqCst),
            )),
        }
    }

    fn pause_schedule(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<proto::api::ScheduleInfo, ApiFailure> {
        match self.scheduler() {
            Some(scheduler) => scheduler.pause(name, paused),
            None => Err(no_schedule(
                name,
                self.inner.shutting_down.load(Ordering::SeqCst),
            )),
        }
    }

    fn memory(&self) -> Result<MemoryList, ApiFailure> {
        crate::memory::list(&self.inner.parts.cfg)
            .map(|notes| MemoryList { notes })
            .map_err(|e| ApiFailure::Internal(format!("cannot read memory: {e}")))
    }

    fn notifications(&self) -> Result<NotificationList, ApiFailure> {
        crate::heartbeat::list(&self.inner.parts.cfg)
            .map(|notifications| NotificationList { notifications })
            .map_err(|e| ApiFailure::Internal(format!("cannot read notifications: {e}")))
    }

    async fn status(&self) -> Status {
        status::status(&self.inner).await
    }

    fn usage(&self, query: &UsageQuery) -> Result<proto::api::UsageReport, ApiFailure> {
        metrics::usage(&self.inner, query)
    }

    fn metrics(&self) -> Arc<dyn bxmetrics::Source> {
        Arc::new(self.clone())
    }
}
