//! What the HTTP layer needs from loopd: the contract between `api` (HTTP, SSE, peer checks)
//! and the engine that runs turns. Tests of the HTTP layer use a stand-in.

use super::UsageQuery;
use bxcore::{ApprovalId, SessionId, TurnEvent};
use proto::api::{
    ApprovalAnswer, ApprovalAnswered, ApprovalList, CancelAnswer, CompactAnswer,
    MAX_DENY_REASON_BYTES, MemoryList, NotificationList, RecordsPage, ScheduleInfo, ScheduleList,
    ScheduleStarted, SessionList, Status, TaskAccepted, TaskRequest, UsageReport,
};
use std::future::Future;
use std::sync::Arc;
use tokio::sync::{broadcast, mpsc};

/// A task that started: its user record is durable.
#[derive(Debug)]
pub struct Submitted {
    /// Where and which turn it is.
    pub accepted: TaskAccepted,
    /// The turn's events, from `Started` to `Ended`; the channel closes after `Ended`.
    pub events: mpsc::UnboundedReceiver<TurnEvent>,
}

/// Why a request could not be served; each maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiFailure {
    /// 400: the request was wrong; says how.
    #[error("{0}")]
    BadRequest(String),
    /// 403: this peer may not do that; says why.
    #[error("{0}")]
    Forbidden(String),
    /// 404: no such session.
    #[error("{0}")]
    NotFound(String),
    /// 409: the session's queue is full.
    #[error("{0}")]
    Busy(String),
    /// 409: what is on disk is not what the request expects (an undo of files changed since).
    #[error("{0}")]
    Conflict(String),
    /// 503: loopd cannot serve it now (shutting down, store failing).
    #[error("{0}")]
    Unavailable(String),
    /// 500: something broke inside loopd.
    #[error("{0}")]
    Internal(String),
    /// 429: too many tasks wait across all sessions (`[api] max_waiting_tasks`).
    #[error("{0}")]
    TooManyWaiting(String),
    /// 429: a budget is spent (`[budgets] max_generated_tokens_per_day`); names the budget and
    /// the figure, and when it renews.
    #[error("{0}")]
    OverBudget(String),
    /// 507: the disk is full (or the quota spent); says what could not be written.
    #[error("{0}")]
    InsufficientStorage(String),
}

/// The engine behind the API.
pub trait Backend: Send + Sync + 'static {
    /// Queues a task and resolves once its user record is durable (for a busy session: once
    /// the task's turn starts). A full queue is [`ApiFailure::Busy`].
    fn submit(
        &self,
        task: TaskRequest,
    ) -> impl Future<Output = Result<Submitted, ApiFailure>> + Send;
    /// [`Backend::submit`] for a task nobody watches (a schedule's run): a call in its turn
    /// (or its subagents') that needs the owner's approval is also written as a
    /// notification, and is denied when nobody answers in time. By default, a plain submit.
    fn submit_unattended(
        &self,
        task: TaskRequest,
    ) -> impl Future<Output = Result<Submitted, ApiFailure>> + Send {
        self.submit(task)
    }
    /// [`Backend::submit_unattended`] into a session that must be new (a schedule's run with
    /// `session = "new"`): when session `task.session` exists, or a task is queued for it
    /// already, nothing is queued and the answer is [`ApiFailure::Forbidden`]. A run never
    /// goes into a session a client made before it. By default, refused: a backend that
    /// cannot check so runs no such run (fail closed).
    fn submit_unattended_new(
        &self,
        task: TaskRequest,
    ) -> impl Future<Output = Result<Submitted, ApiFailure>> + Send {
        let _ = task;
        std::future::ready(Err(ApiFailure::Internal(
            "this backend cannot make a run's new session".into(),
        )))
    }
    /// Every session.
    fn sessions(&self) -> Result<SessionList, ApiFailure>;
    /// Up to `limit` records of session `id` from index `from`.
    fn records(&self, id: &SessionId, from: u64, limit: u64) -> Result<RecordsPage, ApiFailure>;
    /// The events of every turn of session `id` from now on.
    fn follow(&self, id: &SessionId) -> Result<broadcast::Receiver<TurnEvent>, ApiFailure>;
    /// Cancels the running turn of session `id` and drops its queued tasks.
    fn cancel(&self, id: &SessionId) -> Result<CancelAnswer, ApiFailure>;
    /// Undoes the last turns of session `id` (`asked`), behind the tasks queued for it: brokerd
    /// puts back what they wrote, then they leave the model's context (`docs/undo.md`). A file
    /// changed since is [`ApiFailure::Conflict`], naming it. The default serves no undo.
    fn undo(
        &self,
        id: &SessionId,
        asked: proto::UndoTurns,
    ) -> impl Future<Output = Result<proto::UndoAnswer, ApiFailure>> + Send {
        let _ = (id, asked);
        async { Err(ApiFailure::NotFound("undo is not served here".into())) }
    }
    /// A new session whose log starts as a copy of session `id`'s up to the end of a turn
    /// (`asked`), behind the tasks queued for `id`. The default serves no fork.
    fn fork(
        &self,
        id: &SessionId,
        asked: proto::ForkRequest,
    ) -> impl Future<Output = Result<proto::ForkAnswer, ApiFailure>> + Send {
        let _ = (id, asked);
        async { Err(ApiFailure::NotFound("fork is not served here".into())) }
    }
    /// What session `id`'s turns wrote (turn `turn`'s only, when given), as diffs. The default
    /// serves none.
    fn diff(&self, id: &SessionId, turn: Option<u64>) -> Result<proto::DiffAnswer, ApiFailure> {
        let _ = (id, turn);
        Err(ApiFailure::NotFound("diff is not served here".into()))
    }
    /// Compacts session `id` into a new epoch, behind the tasks queued for it (a full queue is
    /// [`ApiFailure::Busy`]); resolves once the epoch's start is durable. A session with
    /// nothing to compact is [`ApiFailure::BadRequest`].
    fn compact(
        &self,
        id: &SessionId,
    ) -> impl Future<Output = Result<CompactAnswer, ApiFailure>> + Send;
    /// Every memory note, with its labels.
    fn memory(&self) -> Result<MemoryList, ApiFailure>;
    /// Every notification the heartbeat kept, oldest first.
    fn notifications(&self) -> Result<NotificationList, ApiFailure>;
    /// How loopd, the broker and the model server are.
    fn status(&self) -> impl Future<Output = Status> + Send;
    /// Every call waiting for the owner's approval, across sessions, oldest first.
    fn approvals(&self) -> Result<ApprovalList, ApiFailure>;
    /// The owner's `answer` to approval `id`, from a peer of user `uid`; resolves once the
    /// decision is in the session log. No call waiting under `id` is [`ApiFailure::NotFound`];
    /// a bad answer (a reason too long) is [`ApiFailure::BadRequest`].
    fn answer_approval(
        &self,
        id: &ApprovalId,
        answer: ApprovalAnswer,
        uid: Option<u32>,
    ) -> impl Future<Output = Result<ApprovalAnswered, ApiFailure>> + Send;
    /// Every schedule (the heartbeat among them), sorted by name.
    fn schedules(&self) -> Result<ScheduleList, ApiFailure>;
    /// Runs schedule `name` now, outside its timing; resolves once the run's task is accepted.
    /// No such schedule is [`ApiFailure::NotFound`]; its previous run still going is
    /// [`ApiFailure::Busy`].
    fn run_schedule(
        &self,
        name: &str,
    ) -> impl Future<Output = Result<ScheduleStarted, ApiFailure>> + Send;
    /// Pauses (or resumes) schedule `name`; returns once the flag is durable. No such schedule
    /// is [`ApiFailure::NotFound`].
    fn pause_schedule(&self, name: &str, paused: bool) -> Result<ScheduleInfo, ApiFailure>;
    /// The usage accounts `query` asks for (see [`UsageReport`]). A session loopd does not
    /// know is [`ApiFailure::NotFound`]; one that spent nothing reads as zeros.
    fn usage(&self, query: &UsageQuery) -> Result<UsageReport, ApiFailure>;
    /// What `GET /metrics` answers from (the same source serves `[metrics] listen`).
    fn metrics(&self) -> Arc<dyn bxmetrics::Source>;
}

/// Checks the owner's answer before anything waits on it: a reason reaches the model, so it
/// is at most [`MAX_DENY_REASON_BYTES`] ([`ApiFailure::BadRequest`] past it). The route checks
/// every answer, and the engine again, so no backend relays an over-long one.
pub fn check_approval_answer(answer: &ApprovalAnswer) -> Result<(), ApiFailure> {
    match &answer.reason {
        Some(reason) if reason.len() > MAX_DENY_REASON_BYTES => {
            Err(ApiFailure::BadRequest(format!(
                "the reason is {} bytes, longer than the {MAX_DENY_REASON_BYTES} bytes a reason \
                 may be (the model reads it)",
                reason.len()
            )))
        }
        _ => Ok(()),
    }
}
