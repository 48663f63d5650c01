//! What the API tests share: a scripted stand-in `Backend`, a server on a temporary socket,
//! and requests sent with bxhttp's client.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

mod fixtures;
mod usage;

pub use fixtures::{
    HOSTILE, XSS_SESSION, stub_diff, stub_pending_approval, stub_schedule, stub_undo,
};

use bxcore::{
    CallId, DataClass, LogRecord, SessionId, Timestamp, ToolCall, ToolOutcome, TurnEnd, TurnEvent,
};
use bxhttp::client::AnswerBody;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body, Frame};
use loopd::api::{
    ApiFailure, ApiOptions, Backend, Limits, MetricsSource, Submitted, UsageQuery, bind_socket,
    serve,
};
use proto::api::{
    BrokerStatus, CancelAnswer, CompactAnswer, LlamaStatus, LoopdStatus, RecordsPage, SessionInfo,
    SessionList, SlotRoles, Status, TaskAccepted, TaskRequest,
};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, oneshot};

/// How long a test waits for anything before it fails, in milliseconds.
pub const WAIT_MS: u64 = 10_000;

/// What the stand-in says to a task for session `full`, as the engine says it.
pub const DISK_FULL: &str =
    "disk full: /state/sessions/full/log.jsonl: No space left on device (os error 28)";

/// The records the stand-in holds for session `s1`.
pub const S1_RECORDS: u64 = 5;

/// The events of the stand-in's scripted turn `turn` in `session`.
pub fn scripted_turn(session: &SessionId, turn: u64) -> Vec<TurnEvent> {
    vec![
        TurnEvent::Started {
            session: session.clone(),
            turn,
        },
        TurnEvent::Content { text: "Hel".into() },
        TurnEvent::ToolCall {
            call: CallId(1),
            tool_call: ToolCall {
                id: "c1".into(),
                name: "clock".into(),
                arguments: "{}".into(),
            },
        },
        TurnEvent::ToolResult {
            call: CallId(1),
            outcome: ToolOutcome::Ok,
            class: DataClass::Public,
            untrusted: false,
            truncated: false,
            bytes: 25,
        },
        TurnEvent::Content { text: "lo".into() },
        TurnEvent::Ended {
            turn,
            end: TurnEnd::Done,
            context: Default::default(),
        },
    ]
}

/// A scripted engine. Sessions: `s1` (known, 5 records), `busy` (full queue), `full` (the
/// disk is full), `slow` (a turn whose events the test sends through [`Stub::slow_turn`]);
/// any other is unknown.
pub struct Stub {
    /// Every task submitted, in order.
    pub submitted: Mutex<Vec<TaskRequest>>,
    /// The last `(from, limit)` asked of `records`.
    pub last_page: Mutex<Option<(u64, u64)>>,
    /// The sender of `s1`'s follow channel.
    pub follow: broadcast::Sender<TurnEvent>,
    /// The sender of the `slow` session's running turn, once submitted.
    pub slow_turn: Mutex<Option<mpsc::UnboundedSender<TurnEvent>>>,
    /// Every answer to `ap-1`, with the peer's uid.
    pub answered: Mutex<Vec<(proto::api::ApprovalAnswer, Option<u32>)>>,
    /// Every undo asked of `s1`, dry runs included.
    pub undos: Mutex<Vec<proto::UndoTurns>>,
}

impl Stub {
    /// A stand-in whose follow channel holds `follow_capacity` events.
    pub fn new(follow_capacity: usize) -> Stub {
        Stub {
            submitted: Mutex::new(Vec::new()),
            last_page: Mutex::new(None),
            follow: broadcast::channel(follow_capacity).0,
            slow_turn: Mutex::new(None),
            answered: Mutex::new(Vec::new()),
            undos: Mutex::new(Vec::new()),
        }
    }
}

fn known(id: &SessionId) -> Result<(), ApiFailure> {
    if id.as_str() == "s1" || id.as_str() == XSS_SESSION {
        Ok(())
    } else {
        Err(ApiFailure::NotFound(format!("no session {id}")))
    }
}

/// Record `i` of `s1`.
pub fn s1_record(i: u64) -> LogRecord {
    LogRecord::User {
        time: Timestamp::parse("2026-01-02T03:04:05Z").unwrap(),
        turn: i + 1,
        content: format!("task {i}"),
        task_id: None,
    }
}

impl Backend for Stub {
    async fn submit(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
        self.submitted.lock().unwrap().push(task.clone());
        let session = task
            .session
            .clone()
            .unwrap_or_else(|| SessionId::new("new-1").unwrap());
        let (tx, rx) = mpsc::unbounded_channel();
        match session.as_str() {
            "busy" => return Err(ApiFailure::Busy("session busy: 8 tasks wait".into())),
            "gone" => return Err(ApiFailure::NotFound("no session gone".into())),
            "full" => return Err(ApiFailure::InsufficientStorage(DISK_FULL.into())),
            "slow" => *self.slow_turn.lock().unwrap() = Some(tx),
            _ => {
                for event in scripted_turn(&session, 3) {
                    tx.send(event).unwrap();
                }
            }
        }
        Ok(Submitted {
            accepted: TaskAccepted {
                session,
                turn: 3,
                end: None,
            },
            events: rx,
        })
    }

    fn sessions(&self) -> Result<SessionList, ApiFailure> {
        Ok(SessionList {
            sessions: vec![SessionInfo {
                id: SessionId::new("s1").unwrap(),
                last_turn: 5,
                records: S1_RECORDS,
                busy: true,
                queued: 2,
            }],
        })
    }

    fn records(&self, id: &SessionId, from: u64, limit: u64) -> Result<RecordsPage, ApiFailure> {
        known(id)?;
        if id.as_str() == XSS_SESSION {
            return Ok(fixtures::hostile_page(id));
        }
        *self.last_page.lock().unwrap() = Some((from, limit));
        let end = (from + limit).min(S1_RECORDS);
        Ok(RecordsPage {
            session: id.clone(),
            from,
            records: (from..end).map(s1_record).collect(),
            next: (end < S1_RECORDS).then_some(end),
        })
    }

    fn follow(&self, id: &SessionId) -> Result<broadcast::Receiver<TurnEvent>, ApiFailure> {
        known(id)?;
        Ok(self.follow.subscribe())
    }

    fn cancel(&self, id: &SessionId) -> Result<CancelAnswer, ApiFailure> {
        known(id)?;
        Ok(CancelAnswer {
            session: id.clone(),
            cancelled: true,
            dropped: 2,
        })
    }

    async fn compact(&self, id: &SessionId) -> Result<CompactAnswer, ApiFailure> {
        match id.as_str() {
            "busy" => return Err(ApiFailure::Busy("session busy: 8 tasks wait".into())),
            "empty" => return Err(ApiFailure::BadRequest("nothing to compact".into())),
            _ => known(id)?,
        }
        Ok(CompactAnswer {
            session: id.clone(),
            epoch: 2,
            model_failure: None,
            carry_chars: 120,
            notes: 1,
        })
    }

    fn notifications(&self) -> Result<proto::api::NotificationList, ApiFailure> {
        Ok(proto::api::NotificationList {
            notifications: Vec::new(),
        })
    }

    fn memory(&self) -> Result<proto::api::MemoryList, ApiFailure> {
        Ok(proto::api::MemoryList { notes: Vec::new() })
    }

    async fn status(&self) -> Status {
        status()
    }
    fn approvals(&self) -> Result<proto::api::ApprovalList, ApiFailure> {
        Ok(proto::api::ApprovalList {
            approvals: vec![stub_pending_approval()],
        })
    }

    async fn answer_approval(
        &self,
        approval: &bxcore::ApprovalId,
        answer: proto::api::ApprovalAnswer,
        uid: Option<u32>,
    ) -> Result<proto::api::ApprovalAnswered, ApiFailure> {
        if approval.as_str() != "ap-1" {
            return Err(ApiFailure::NotFound(format!(
                "no call waits for approval {approval}"
            )));
        }
        self.answered.lock().unwrap().push((answer.clone(), uid));
        Ok(proto::api::ApprovalAnswered {
            id: approval.clone(),
            session: SessionId::new("s1").unwrap(),
            call: bxcore::CallId(4),
            decision: answer.answer.decision(),
        })
    }
    async fn undo(
        &self,
        id: &SessionId,
        asked: proto::UndoTurns,
    ) -> Result<proto::UndoAnswer, ApiFailure> {
        known(id)?;
        self.undos.lock().unwrap().push(asked.clone());
        stub_undo(id, &asked)
    }

    fn diff(&self, id: &SessionId, turn: Option<u64>) -> Result<proto::DiffAnswer, ApiFailure> {
        known(id)?;
        Ok(stub_diff(id, turn))
    }

    fn schedules(&self) -> Result<proto::api::ScheduleList, ApiFailure> {
        Ok(proto::api::ScheduleList {
            schedules: vec![stub_schedule(false)],
        })
    }

    async fn run_schedule(&self, name: &str) -> Result<proto::api::ScheduleStarted, ApiFailure> {
        if name != "daily" {
            return Err(ApiFailure::NotFound(format!("no schedule named {name:?}")));
        }
        Ok(proto::api::ScheduleStarted {
            name: name.to_string(),
            session: SessionId::new("daily-20260102T070000Z").unwrap(),
            turn: 1,
        })
    }

    fn pause_schedule(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<proto::api::ScheduleInfo, ApiFailure> {
        if name != "daily" {
            return Err(ApiFailure::NotFound(format!("no schedule named {name:?}")));
        }
        Ok(stub_schedule(paused))
    }
    fn usage(&self, query: &UsageQuery) -> Result<proto::api::UsageReport, ApiFailure> {
        if let Some(id) = &query.session {
            known(id)?;
        }
        Ok(usage::report(query))
    }
    fn metrics(&self) -> Arc<dyn MetricsSource> {
        Arc::new(usage::StubMetrics)
    }
}

/// The stand-in's status.
pub fn status() -> Status {
    Status {
        loopd: LoopdStatus {
            version: "0.1.0".into(),
            uptime_s: 7,
            running: 1,
            queued: 2,
        },
        broker: BrokerStatus {
            kind: "fake".into(),
            socket: None,
            ok: true,
            note: "fake tools (no broker configured)".into(),
            exec: None,
            checkpoints: None,
        },
        llama: LlamaStatus {
            url: "http://127.0.0.1:8080".into(),
            ok: true,
            error: None,
            n_ctx: 8192,
            total_slots: 3,
            model: "fakellama".into(),
            slots: SlotRoles {
                main: 0,
                background: 1,
                subagent: 2,
            },
            endpoints: Vec::new(),
        },
        usage: proto::api::UsageToday {
            day: "2026-12-01".into(),
            timezone: "UTC".into(),
            totals: proto::api::UsageTotals::default(),
            max_generated_tokens_per_day: None,
        },
        kv: None,
    }
}

/// A served stand-in: its socket, the stand-in, and how to stop it.
pub struct Served {
    /// The socket.
    pub socket: PathBuf,
    /// The stand-in behind it.
    pub stub: Arc<Stub>,
    stop: Option<oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

/// The options the tests serve with: a 1 KiB body cap, pages of 2, fast pings.
pub fn test_options() -> ApiOptions {
    ApiOptions {
        max_body_bytes: 1024,
        page_records: 2,
        allowed_gid: None,
        own_uid: nix::unistd::getuid().as_raw(),
        sse_ping_interval_ms: 50,
        connections: Limits {
            max_connections: 64,
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            shutdown_drain_ms: 1_000,
        },
        broker: None,
        web: None,
    }
}

/// Serves a new stand-in with `options` on a socket in a new temporary directory.
pub fn start(options: ApiOptions) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("loopd.sock");
    let listener = bind_socket(&socket, None).unwrap();
    let stub = Arc::new(Stub::new(4));
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, Arc::clone(&stub), options, async move {
        let _ = stopped.await;
    }));
    Served {
        socket,
        stub,
        stop: Some(stop),
        server,
        _dir: dir,
    }
}

impl Served {
    /// Stops the server and waits (bounded) until it has.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        bounded(&mut self.server).await.unwrap();
    }
}

/// `future`, failing the test when it takes longer than [`WAIT_MS`].
pub async fn bounded<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_millis(WAIT_MS), future)
        .await
        .expect("timed out")
}

/// A request body sent in the given chunks, with no length up front (chunked encoding).
pub struct Chunks(pub VecDeque<Bytes>);

impl Body for Chunks {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
    }
}

/// Sends `request` on a new connection to `socket`; the answer's status, headers and body.
pub async fn send<B: bxhttp::client::SendBody>(
    socket: &Path,
    request: Request<B>,
) -> (StatusCode, HeaderMap, AnswerBody) {
    let response = bounded(bxhttp::client::send(socket, request))
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    (parts.status, parts.headers, body)
}

/// A request of `method` to `path` with `body` (none when empty) and extra `headers`.
pub fn request(
    method: Method,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Request<Full<Bytes>> {
    let mut builder = Request::builder()
        .method(method)
        .uri(format!("http://loopd{path}"))
        .header("host", "loopd");
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    builder
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

/// `GET path` with no body.
pub fn get(path: &str) -> Request<Empty<Bytes>> {
    Request::builder()
        .uri(format!("http://loopd{path}"))
        .header("host", "loopd")
        .body(Empty::new())
        .unwrap()
}

/// The whole body as text.
pub async fn text(body: AnswerBody) -> String {
    let bytes = bounded(body.collect()).await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// The whole body as JSON.
pub async fn json(body: AnswerBody) -> serde_json::Value {
    serde_json::from_str(&text(body).await).unwrap()
}

/// Reads `body` until `done` says the text so far is enough; the text read.
pub async fn read_until(body: &mut AnswerBody, done: impl Fn(&str) -> bool) -> String {
    let mut seen = String::new();
    while !done(&seen) {
        let frame = bounded(body.frame()).await;
        let Some(frame) = frame else {
            panic!("the stream ended before the condition held; read: {seen:?}")
        };
        if let Ok(data) = frame.unwrap().into_data() {
            seen.push_str(std::str::from_utf8(&data).unwrap());
        }
    }
    seen
}

/// The `data:` lines of `event: turn` frames in `text`, parsed.
pub fn turn_events(text: &str) -> Vec<TurnEvent> {
    text.split("\n\n")
        .filter_map(|frame| frame.strip_prefix("event: turn\ndata: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}
