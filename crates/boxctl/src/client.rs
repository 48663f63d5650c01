//! A client of loopd's API over its Unix socket: one HTTP/1.1 connection per request
//! ([`bxhttp::client`]), JSON answers, and turn events read from server-sent events.

use crate::sse::{SseItem, SseParser};
use bxcore::{ApprovalId, SessionId, TurnEvent};
use bxhttp::client::{AnswerBody, ClientError as HttpError};
use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use proto::api::{
    ApiError, ApprovalAnswer, ApprovalAnswered, ApprovalList, CancelAnswer, CompactAnswer,
    MemoryList, NotificationList, RecordsPage, SSE_EVENT_TURN, ScheduleInfo, ScheduleList,
    ScheduleStarted, SessionList, Status, TaskAccepted, TaskRequest, UsageReport, WebLink,
    WebRevoked,
};
use serde::de::DeserializeOwned;
use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where loopd's socket is installed.
pub const DEFAULT_SOCKET: &str = "/run/boxmaker/loopd.sock";

/// The longest a request that does not stream may take, answer included, in milliseconds.
pub const REQUEST_TIMEOUT_MS: u64 = 30_000;

/// What went wrong talking to loopd.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// loopd's socket could not be connected to.
    #[error("{}", unreachable_message(socket, *kind, detail))]
    Unreachable {
        /// The socket.
        socket: PathBuf,
        /// Why, as the OS said.
        kind: io::ErrorKind,
        /// The OS's words.
        detail: String,
    },
    /// The connection broke, or loopd did not answer in time.
    #[error("lost the connection to loopd at {}: {reason}", socket.display())]
    Lost {
        /// The socket.
        socket: PathBuf,
        /// What happened.
        reason: String,
    },
    /// loopd answered with an error.
    #[error("{}", error.error.message)]
    Api {
        /// The HTTP status.
        status: u16,
        /// loopd's error body.
        error: ApiError,
    },
    /// loopd's answer was not what the API says.
    #[error("loopd's answer was not understood: {0}")]
    Protocol(String),
}

fn unreachable_message(socket: &Path, kind: io::ErrorKind, detail: &str) -> String {
    let at = socket.display();
    match kind {
        io::ErrorKind::NotFound => {
            format!("loopd is not running at {at} (no socket there); start it or set --socket")
        }
        io::ErrorKind::ConnectionRefused => {
            format!("loopd is not running at {at} (connection refused); start it or set --socket")
        }
        io::ErrorKind::PermissionDenied => format!(
            "cannot connect to loopd at {at} (permission denied); is this user in loopd's group?"
        ),
        _ => format!("cannot connect to loopd at {at} ({detail}); start it or set --socket"),
    }
}

/// An answer as parsed, with its raw JSON text (for `--json`).
#[derive(Debug, Clone)]
pub struct Answer<T> {
    /// The parsed body.
    pub value: T,
    /// The body as loopd sent it.
    pub raw: String,
}

/// One thing an event stream brought.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// A turn event, with its JSON text.
    Event {
        /// The event.
        event: TurnEvent,
        /// Its JSON as loopd sent it.
        raw: String,
    },
    /// A comment from loopd (pings, or that events were skipped).
    Comment(String),
}

/// A stream of turn events from loopd.
#[derive(Debug)]
pub struct EventStream {
    socket: PathBuf,
    body: AnswerBody,
    parser: SseParser,
    pending: VecDeque<SseItem>,
}

impl EventStream {
    /// The next item; `None` when loopd ended the stream.
    pub async fn next(&mut self) -> Result<Option<StreamItem>, ClientError> {
        loop {
            while let Some(item) = self.pending.pop_front() {
                match item {
                    SseItem::Comment(text) => return Ok(Some(StreamItem::Comment(text))),
                    SseItem::Event { name, data } if name == SSE_EVENT_TURN => {
                        let event = serde_json::from_str(&data).map_err(|e| {
                            ClientError::Protocol(format!("a turn event ({e}): {data}"))
                        })?;
                        return Ok(Some(StreamItem::Event { event, raw: data }));
                    }
                    SseItem::Event { .. } => {} // Other event names are for other clients.
                }
            }
            let Some(frame) = self.body.frame().await else {
                return Ok(None);
            };
            let frame = frame.map_err(|e| lost(&self.socket, e))?;
            if let Ok(data) = frame.into_data() {
                let mut items = Vec::new();
                self.parser
                    .push(&data, &mut items)
                    .map_err(|e| ClientError::Protocol(e.to_string()))?;
                self.pending.extend(items);
            }
        }
    }
}

fn lost(socket: &Path, reason: impl std::fmt::Display) -> ClientError {
    ClientError::Lost {
        socket: socket.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// A client of loopd at one socket.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    request_timeout_ms: u64,
}

impl Client {
    /// A client of loopd at `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> Client {
        Client {
            socket: socket.into(),
            request_timeout_ms: REQUEST_TIMEOUT_MS,
        }
    }

    /// The socket it talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Sends one request on a new connection; an error status becomes [`ClientError::Api`].
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        event_stream: bool,
    ) -> Result<hyper::Response<AnswerBody>, ClientError> {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("http://loopd{path}"))
            .header(header::HOST, "loopd");
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        if event_stream {
            request = request.header(header::ACCEPT, "text/event-stream");
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| ClientError::Protocol(format!("cannot build the request: {e}")))?;
        let response = bxhttp::client::send(&self.socket, request)
            .await
            .map_err(|e| match e {
                HttpError::Connect { socket, source } => ClientError::Unreachable {
                    socket,
                    kind: source.kind(),
                    detail: source.to_string(),
                },
                other => lost(&self.socket, other),
            })?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let raw = self.read_text(response.into_body()).await?;
        Err(api_error(status, &raw))
    }

    async fn read_text(&self, body: AnswerBody) -> Result<String, ClientError> {
        let bytes = body
            .collect()
            .await
            .map_err(|e| lost(&self.socket, e))?
            .to_bytes();
        String::from_utf8(bytes.to_vec())
            .map_err(|_| ClientError::Protocol("the answer is not UTF-8".into()))
    }

    /// A request whose whole answer is one JSON body, bounded by [`REQUEST_TIMEOUT_MS`].
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Answer<T>, ClientError> {
        let limit = Duration::from_millis(self.request_timeout_ms);
        tokio::time::timeout(limit, self.call_unbounded(method, path, body))
            .await
            .map_err(|_| lost(&self.socket, format!("no answer within {limit:?}")))?
    }

    /// A request whose whole answer is one JSON body, however long loopd takes.
    async fn call_unbounded<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Answer<T>, ClientError> {
        let response = self.send(method, path, body, false).await?;
        let raw = self.read_text(response.into_body()).await?;
        let value =
            serde_json::from_str(&raw).map_err(|e| ClientError::Protocol(format!("{e}: {raw}")))?;
        Ok(Answer { value, raw })
    }

    async fn stream(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<EventStream, ClientError> {
        let response = self.send(method, path, body, true).await?;
        Ok(EventStream {
            socket: self.socket.clone(),
            body: response.into_body(),
            parser: SseParser::new(),
            pending: VecDeque::new(),
        })
    }

    /// `POST /v1/tasks` without streaming: the turn runs on; its session and number. Not
    /// time-bounded: for a busy session loopd answers once the task's turn starts.
    pub async fn submit(&self, task: &TaskRequest) -> Result<Answer<TaskAccepted>, ClientError> {
        self.call_unbounded(Method::POST, "/v1/tasks", Some(to_json(task)?))
            .await
    }

    /// `POST /v1/tasks`, streaming the turn's events until it ends.
    pub async fn submit_stream(&self, task: &TaskRequest) -> Result<EventStream, ClientError> {
        self.stream(Method::POST, "/v1/tasks", Some(to_json(task)?))
            .await
    }

    /// `GET /v1/sessions`.
    pub async fn sessions(&self) -> Result<Answer<SessionList>, ClientError> {
        self.call(Method::GET, "/v1/sessions", None).await
    }

    /// `GET /v1/sessions/{id}?from=N[&limit=M]`: a page of records (loopd's page size when
    /// `limit` is `None`).
    pub async fn records(
        &self,
        id: &SessionId,
        from: u64,
        limit: Option<u64>,
    ) -> Result<Answer<RecordsPage>, ClientError> {
        let mut path = format!("/v1/sessions/{id}?from={from}");
        if let Some(limit) = limit {
            path.push_str(&format!("&limit={limit}"));
        }
        self.call(Method::GET, &path, None).await
    }

    /// `GET /v1/sessions/{id}/events`: the session's events from now on.
    pub async fn follow(&self, id: &SessionId) -> Result<EventStream, ClientError> {
        self.stream(Method::GET, &format!("/v1/sessions/{id}/events"), None)
            .await
    }

    /// `POST /v1/sessions/{id}/cancel`.
    pub async fn cancel(&self, id: &SessionId) -> Result<Answer<CancelAnswer>, ClientError> {
        self.call(Method::POST, &format!("/v1/sessions/{id}/cancel"), None)
            .await
    }

    /// `POST /v1/sessions/{id}/compact`: the session's new epoch. Not time-bounded: loopd
    /// answers once the tasks queued before it have run and the compaction is done.
    pub async fn compact(&self, id: &SessionId) -> Result<Answer<CompactAnswer>, ClientError> {
        self.call_unbounded(Method::POST, &format!("/v1/sessions/{id}/compact"), None)
            .await
    }

    /// `POST /v1/web/link`: a one-time sign-in link for the web console.
    pub async fn web_link(&self) -> Result<Answer<WebLink>, ClientError> {
        self.call(Method::POST, "/v1/web/link", None).await
    }

    /// `POST /v1/web/revoke`: every browser session and unused link ended.
    pub async fn web_revoke(&self) -> Result<Answer<WebRevoked>, ClientError> {
        self.call(Method::POST, "/v1/web/revoke", None).await
    }

    /// `GET /v1/status`.
    pub async fn status(&self) -> Result<Answer<Status>, ClientError> {
        self.call(Method::GET, "/v1/status", None).await
    }

    /// `GET /v1/memory`.
    pub async fn memory(&self) -> Result<Answer<MemoryList>, ClientError> {
        self.call(Method::GET, "/v1/memory", None).await
    }

    /// `GET /v1/notifications`.
    pub async fn notifications(&self) -> Result<Answer<NotificationList>, ClientError> {
        self.call(Method::GET, "/v1/notifications", None).await
    }

    /// `GET /v1/approvals`: the calls waiting for the owner, across sessions.
    pub async fn approvals(&self) -> Result<Answer<ApprovalList>, ClientError> {
        self.call(Method::GET, "/v1/approvals", None).await
    }

    /// `POST /v1/approvals/{id}`: the owner's answer; loopd answers once the decision is in
    /// the session log.
    pub async fn answer_approval(
        &self,
        id: &ApprovalId,
        answer: &ApprovalAnswer,
    ) -> Result<Answer<ApprovalAnswered>, ClientError> {
        let path = format!("/v1/approvals/{id}");
        self.call(Method::POST, &path, Some(to_json(answer)?)).await
    }

    /// `GET /v1/schedules`: every schedule, the heartbeat among them.
    pub async fn schedules(&self) -> Result<Answer<ScheduleList>, ClientError> {
        self.call(Method::GET, "/v1/schedules", None).await
    }

    /// `POST /v1/schedules/{name}/run`: runs it now; loopd answers once the run's task is
    /// accepted. `name` must be a schedule's name (A-Z a-z 0-9 . _ -): it goes into the path.
    /// Not time-bounded, like [`Client::submit`]: in a fixed session that is busy, the task
    /// may wait for the turn before it.
    pub async fn run_schedule(&self, name: &str) -> Result<Answer<ScheduleStarted>, ClientError> {
        self.call_unbounded(Method::POST, &format!("/v1/schedules/{name}/run"), None)
            .await
    }

    /// `GET /v1/usage[?session=ID][&day=YYYY-MM-DD]`: the usage accounts. `day` must be a
    /// checked date: it goes into the query as it is.
    pub async fn usage(
        &self,
        session: Option<&SessionId>,
        day: Option<&str>,
    ) -> Result<Answer<UsageReport>, ClientError> {
        let query: Vec<String> = session
            .map(|s| format!("session={s}"))
            .into_iter()
            .chain(day.map(|d| format!("day={d}")))
            .collect();
        let path = match query.is_empty() {
            true => "/v1/usage".to_string(),
            false => format!("/v1/usage?{}", query.join("&")),
        };
        self.call(Method::GET, &path, None).await
    }

    /// `POST /v1/schedules/{name}/pause` (or `.../resume` when not `paused`); loopd answers
    /// once the flag is durable.
    pub async fn pause_schedule(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<Answer<ScheduleInfo>, ClientError> {
        let verb = if paused { "pause" } else { "resume" };
        self.call(Method::POST, &format!("/v1/schedules/{name}/{verb}"), None)
            .await
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(value).map_err(|e| ClientError::Protocol(format!("cannot serialise: {e}")))
}

/// The error for an answer of `status` with body `raw`: loopd's [`ApiError`] when the body is
/// one, else one made of the status and the text.
pub fn api_error(status: StatusCode, raw: &str) -> ClientError {
    let error = serde_json::from_str::<ApiError>(raw).unwrap_or_else(|_| {
        let text = raw.trim();
        let message = if text.is_empty() {
            format!("loopd answered {status}")
        } else {
            format!("loopd answered {status}: {text}")
        };
        ApiError::new(status.as_u16(), "unknown", message)
    });
    ClientError::Api {
        status: status.as_u16(),
        error,
    }
}
