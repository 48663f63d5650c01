//! loopd's HTTP API (`/v1`, HTTP/1.1 over loopd's Unix socket): the bodies boxctl sends and
//! reads.
//!
//! | method and path | body | answer |
//! |---|---|---|
//! | `POST /v1/tasks` | [`TaskRequest`] | 202 [`TaskAccepted`] once the user record is durable; with `Accept: text/event-stream`, the turn's [`bxcore::TurnEvent`]s as SSE until it ends. A `task_id` its session already has: that task's turn, its events from now on (or its `started` and `ended`, once it ended) |
//! | `GET /v1/sessions` | | [`SessionList`] |
//! | `GET /v1/sessions/{id}?from=N&limit=M` | | [`RecordsPage`] |
//! | `GET /v1/sessions/{id}/events` | | SSE of [`bxcore::TurnEvent`]s as they happen |
//! | `POST /v1/sessions/{id}/cancel` | | [`CancelAnswer`] |
//! | `POST /v1/sessions/{id}/compact` | | [`CompactAnswer`] once the new epoch's start is durable (queued behind the session's tasks); 400 when there is nothing to compact |
//! | `GET /v1/status` | | [`Status`] |
//! | `GET /v1/memory` | | [`MemoryList`] |
//! | `GET /v1/notifications` | | [`NotificationList`] |
//! | `GET /v1/approvals` | | [`ApprovalList`]: the calls waiting for the owner, across sessions |
//! | `GET /v1/schedules` | | [`ScheduleList`] |
//! | `POST /v1/schedules/{name}/run` | | [`ScheduleStarted`] once the run's task is accepted; 404 no such schedule; 409 its previous run still goes |
//! | `POST /v1/schedules/{name}/pause` | | [`ScheduleInfo`] once the paused flag is durable |
//! | `POST /v1/schedules/{name}/resume` | | [`ScheduleInfo`] once the flag is durable |
//! | `POST /v1/sessions/{id}/undo` | [`crate::UndoTurns`] | [`crate::UndoAnswer`] once brokerd put the files back and the `undone` record is durable; 409 `conflict` when a file was changed since (named); refused to a tool's process |
//! | `POST /v1/sessions/{id}/fork` | [`crate::ForkRequest`] | [`crate::ForkAnswer`] once the new session's log is durable (queued behind the session's tasks); 400 for a turn that did not end or an id that exists |
//! | `GET /v1/sessions/{id}/diff[?turn=N]` | | [`crate::DiffAnswer`]: what the session's turns wrote, as unified diffs |
//! | `POST /v1/approvals/{id}` | [`ApprovalAnswer`] | [`ApprovalAnswered`] once the decision is in the session log; 404 when no call waits under that id (answered, timed out, void, or never asked) |
//! | `POST /v1/web/link` | | [`WebLink`]: a one-time sign-in link for the web console; 400 when `[web] listen` is unset |
//! | `POST /v1/web/revoke` | | [`WebRevoked`]: every browser session and unused link ended; 400 when the console is off |
//!
//! Every error is an [`ApiError`] with a status: 400 bad JSON or session id (or a request head
//! that is not HTTP/1.1), 404 unknown session, approval or path, 409 the session's queue is full, 413
//! body too large, 414 URI too long, 429 too many tasks wait (`[api] max_waiting_tasks`), 431
//! request head too large, 503 not ready, 507 the disk is full.

mod approvals;
mod kv;
mod overheard;
mod schedules;
mod usage;
mod web;

pub use approvals::{
    ApprovalAnswer, ApprovalAnswered, ApprovalList, MAX_DENY_REASON_BYTES, OwnerAnswer,
    PendingApproval,
};
pub use kv::{KvChoice, KvStatus};
pub use overheard::{
    MAX_OVERHEARD_FROM_BYTES, MAX_OVERHEARD_PER_TASK, MAX_OVERHEARD_TEXT_BYTES, OverheardText,
    problem as overheard_problem, speaker_problem,
};
pub use schedules::{
    RunOutcome, RunTrigger, ScheduleInfo, ScheduleList, ScheduleRun, ScheduleStarted,
};
pub use usage::{SessionUsage, UsageReport, UsageToday, UsageTotals};
pub use web::{WebLink, WebRevoked};

use bxcore::{DataClass, LogRecord, MemoryNote, SessionId, TaskId, Timestamp, TurnEnd};
use serde::{Deserialize, Serialize};

/// Session ids that loopd keeps for itself. Grants choose by session id (`sub-*` for
/// subagents, `heartbeat` for the heartbeat), so a client that could name its session so would
/// get grants meant for loopd's own sessions: `POST /v1/tasks` refuses these ids (400), and only
/// loopd creates such sessions.
pub mod reserved {
    use bxcore::SessionId;

    /// The prefix of every subagent's session id: `sub-<parent>-<n>`.
    pub const CHILD_PREFIX: &str = "sub-";
    /// The session heartbeat turns run in.
    pub const HEARTBEAT_SESSION: &str = "heartbeat";
    /// Every whole id loopd keeps for itself.
    pub const NAMES: [&str; 1] = [HEARTBEAT_SESSION];

    /// Why a client may not submit tasks to `id`; `None` when it may.
    pub fn reason(id: &SessionId) -> Option<String> {
        let id = id.as_str();
        if id.starts_with(CHILD_PREFIX) {
            return Some(format!(
                "session ids starting with {CHILD_PREFIX:?} are subagents' and only loopd \
                 creates them: {id:?} cannot be used by a client"
            ));
        }
        NAMES
            .contains(&id)
            .then(|| format!("the session id {id:?} is loopd's own and cannot be used by a client"))
    }
}

/// The SSE event name of a turn event (`event: turn`), and of the stream's end.
pub const SSE_EVENT_TURN: &str = "turn";

/// Asks loopd to run a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskRequest {
    /// The session to run it in; when absent, [`task_session`] of `task_id`, or else a new
    /// session. Never one of [`reserved`]'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// What the user asks.
    pub text: String,
    /// The client's name for this task (1 to 48 bytes of `A-Z a-z 0-9 . _ -`), so that it can
    /// submit it again when it never got an answer: a task whose id its session already has
    /// (waiting, running or ended, also before a restart of loopd) is not run again; the
    /// answer is that task's turn (and its end, once it ended). Its `text` is not looked at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// What others said where the task came from, oldest first, since the task before it
    /// (a shared chat room): written before the task as untrusted text, never as a task. At
    /// most [`MAX_OVERHEARD_PER_TASK`]. Like `text`, not looked at when `task_id` is known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overheard: Vec<OverheardText>,
}

/// The prefix of the session a task with a `task_id` and no `session` runs in.
pub const TASK_SESSION_PREFIX: &str = "task-";

/// The session a task named `task_id` runs in when it names none: `task-<id>`, so that a
/// client submitting it again finds it there.
pub fn task_session(task_id: &TaskId) -> Result<SessionId, bxcore::ValueError> {
    SessionId::new(&format!("{TASK_SESSION_PREFIX}{task_id}"))
}

/// A task was accepted: its user record is on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskAccepted {
    /// The session it runs in.
    pub session: SessionId,
    /// Its turn number in that session.
    pub turn: u64,
    /// How the turn ended, when it had already ended: the task was submitted again under
    /// a `task_id` whose turn is over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<TurnEnd>,
}

/// One session, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionInfo {
    /// Its id.
    pub id: SessionId,
    /// The highest turn number so far.
    pub last_turn: u64,
    /// Its records so far.
    pub records: u64,
    /// Whether a turn runs on it now.
    pub busy: bool,
    /// Tasks waiting for it.
    pub queued: u64,
}

/// Every session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionList {
    /// Sorted by id.
    pub sessions: Vec<SessionInfo>,
}

/// A page of a session's records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordsPage {
    /// The session.
    pub session: SessionId,
    /// The index (from 0) of the first record in this page.
    pub from: u64,
    /// The records.
    pub records: Vec<LogRecord>,
    /// Where the next page starts, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// loopd's memory notes (`GET /v1/memory`), oldest first, each with its labels. All of them,
/// whether or not `[memory]` lets them into baselines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryList {
    /// The notes.
    pub notes: Vec<MemoryNote>,
}

/// What a heartbeat turn said when it was not quiet (its answer was not exactly
/// `HEARTBEAT_OK`), or a call of an unattended turn (the heartbeat's) that waits for the
/// owner's approval: one line of `<state_dir>/notifications.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Notification {
    /// When it was kept.
    pub time: Timestamp,
    /// The session of the turn (`heartbeat`).
    pub session: SessionId,
    /// The turn's number in that session.
    pub turn: u64,
    /// What the turn answered (or how it ended, when it did not answer).
    pub text: String,
    /// The class of the turn's context when it ended: the notification is made from it. A line
    /// written before notifications carried labels reads as `secret`, since nothing says what
    /// it was made from.
    #[serde(default = "unknown_class")]
    pub class: DataClass,
    /// Whether that context was untrusted (a line without it reads as untrusted).
    #[serde(default = "unknown_untrusted")]
    pub untrusted: bool,
    /// Where its schedule asked for it to be sent (`notify_to`, e.g. `matrix:!room:server`), for
    /// a channel such as chatd; none: the channel's default place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

fn unknown_class() -> DataClass {
    DataClass::Secret
}

fn unknown_untrusted() -> bool {
    true
}

/// Every notification, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationList {
    /// The notifications.
    pub notifications: Vec<Notification>,
}

/// The answer to a cancel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelAnswer {
    /// The session.
    pub session: SessionId,
    /// Whether a running turn was told to stop (false: nothing was running).
    pub cancelled: bool,
    /// Queued tasks that were dropped.
    pub dropped: u64,
}

/// A compaction asked for (`POST /v1/sessions/{id}/compact`): the session's new epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactAnswer {
    /// The session.
    pub session: SessionId,
    /// The epoch that began.
    pub epoch: u32,
    /// Why the model's summary was not used, when the carry was made without the model
    /// (the first request, the last messages that fit, and what was left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_failure: Option<String>,
    /// Characters in the carry.
    pub carry_chars: u64,
    /// Memory notes the compaction stored.
    pub notes: u64,
}

/// How the appliance is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Status {
    /// loopd itself.
    pub loopd: LoopdStatus,
    /// The tool broker.
    pub broker: BrokerStatus,
    /// The model server.
    pub llama: LlamaStatus,
    /// What today cost so far, from the usage accounts.
    pub usage: UsageToday,
    /// The KV files (`[kv]`), when they are on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<KvStatus>,
}

/// loopd's own state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopdStatus {
    /// loopd's version.
    pub version: String,
    /// Seconds since it started.
    pub uptime_s: u64,
    /// Sessions with a running turn.
    pub running: u64,
    /// Tasks waiting.
    pub queued: u64,
}

/// Which tool broker loopd uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerStatus {
    /// `brokerd` or `fake` (the in-process FakeTools, until brokerd is configured).
    pub kind: String,
    /// Its socket, for brokerd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<String>,
    /// Whether it answered.
    pub ok: bool,
    /// What to know about it, e.g. that fake tools are in use.
    pub note: String,
    /// brokerd's `exec` walls, as its health answer says them (`proto::BrokerHealth::exec`);
    /// absent with fake tools or when brokerd did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec: Option<String>,
    /// brokerd's checkpoints for undo, as its health answer says them
    /// (`proto::BrokerHealth::checkpoints`); absent with fake tools or when brokerd did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<String>,
}

/// The model server as loopd sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlamaStatus {
    /// Its URL.
    pub url: String,
    /// Whether `/health` answered ok just now.
    pub ok: bool,
    /// What it said when it was not ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Tokens of context per slot, from `/props` at start.
    pub n_ctx: u64,
    /// Its slots, from `/props` at start.
    pub total_slots: u64,
    /// The model alias or path.
    pub model: String,
    /// Slot numbers by role (`[slots]`; each endpoint's own are in `endpoints`).
    pub slots: SlotRoles,
    /// Each model server loopd uses (issue 20): one for `[llama] url`, or the
    /// `[[llama.endpoints]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointStatus>,
}

/// One model server as loopd sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointStatus {
    /// Its name (`default` for `[llama] url`).
    pub name: String,
    /// Its URL.
    pub url: String,
    /// `up`, `failing` (up at the last look, but a call failed since: no new turn goes
    /// there until it is looked at again) or `down`.
    pub state: String,
    /// The model it serves, from its `/props` (none before it was reached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tokens of context per slot, from its `/props`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_ctx: Option<u64>,
    /// Its slots in all, from its `/props`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_slots: Option<u64>,
    /// The slots loopd uses there, by role.
    pub slots: EndpointSlots,
    /// Sessions whose turns keep to it.
    pub sessions: u64,
    /// The last error seen there (a probe's, or a call's), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The slots loopd uses at one endpoint, by role (empty: a role it does not serve).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointSlots {
    /// Turns.
    pub main: Vec<u32>,
    /// Summaries and compaction.
    pub background: Vec<u32>,
    /// Subagents.
    pub subagent: Vec<u32>,
}

/// Which slot does what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotRoles {
    /// Turns.
    pub main: u32,
    /// Summaries and compaction.
    pub background: u32,
    /// Subagents.
    pub subagent: u32,
}

/// Every error answer's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiError {
    /// The error.
    pub error: ApiErrorBody,
}

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiErrorBody {
    /// The HTTP status.
    pub code: u16,
    /// A word for scripts, one of [`error_kind`]: `bad_request`, `forbidden`, `not_found`,
    /// `method_not_allowed`, `busy`, `too_large`, `uri_too_long`, `head_too_large`,
    /// `unavailable`, `internal`, `insufficient_storage`.
    pub kind: String,
    /// What was wrong, for people.
    pub message: String,
}

impl ApiError {
    /// An error of `code` and `kind` saying `message`.
    pub fn new(code: u16, kind: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            error: ApiErrorBody {
                code,
                kind: kind.to_string(),
                message: message.into(),
            },
        }
    }
}

/// The `kind` words of [`ApiErrorBody`], one per HTTP status loopd answers with.
pub mod error_kind {
    /// 400: the request was wrong (bad JSON, unknown field, bad session id or query).
    pub const BAD_REQUEST: &str = "bad_request";
    /// 403: the peer's user may not use loopd's socket.
    pub const FORBIDDEN: &str = "forbidden";
    /// 404: no such session, or no such path.
    pub const NOT_FOUND: &str = "not_found";
    /// 405: the path exists but not with this method.
    pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
    /// 409: the session's queue is full.
    pub const BUSY: &str = "busy";
    /// 409: what is on disk is not what the request expects (an undo of files changed since
    /// the turns wrote them, or whose earlier content is no longer kept; writes not recorded).
    pub const CONFLICT: &str = "conflict";
    /// 429: too many tasks wait across all sessions (`api.max_waiting_tasks`).
    pub const TOO_MANY_TASKS: &str = "too_many_tasks";
    /// 429: a budget is spent: `[budgets] max_generated_tokens_per_day` refuses new tasks
    /// until the day turns.
    pub const BUDGET: &str = "budget";
    /// 413: the request body is larger than `api.max_body_bytes`.
    pub const TOO_LARGE: &str = "too_large";
    /// 414: the request's URI is longer than the HTTP layer reads.
    pub const URI_TOO_LONG: &str = "uri_too_long";
    /// 431: the request head is larger, or has more fields, than the HTTP layer reads.
    pub const HEAD_TOO_LARGE: &str = "head_too_large";
    /// 500: something broke inside loopd.
    pub const INTERNAL: &str = "internal";
    /// 503: loopd cannot serve it now.
    pub const UNAVAILABLE: &str = "unavailable";
    /// 507: the disk is full (or the user's quota spent): what the request would write
    /// cannot be kept.
    pub const INSUFFICIENT_STORAGE: &str = "insufficient_storage";

    /// The word for a request the HTTP layer could not read, by the status it is answered
    /// with (414, 431; anything else is a 400).
    pub fn unreadable(code: u16) -> &'static str {
        match code {
            414 => URI_TOO_LONG,
            431 => HEAD_TOO_LARGE,
            _ => BAD_REQUEST,
        }
    }
}

/// The SSE comment loopd sends on an idle stream to keep it open (`: ping`).
pub const SSE_PING_COMMENT: &str = "ping";

/// How often loopd sends [`SSE_PING_COMMENT`] on an event stream that has had nothing else to
/// send, in milliseconds: a client that hears nothing for several of these periods may take
/// loopd for stuck (boxctl gives up after three).
pub const SSE_PING_INTERVAL_MS: u64 = 15_000;
