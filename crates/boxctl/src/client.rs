//! A client of loopd's API over its Unix socket: one HTTP/1.1 connection per request
//! ([`bxhttp::client`]), JSON answers, and turn events read from server-sent events; every
//! wait bounded by [`crate::limits`].

pub use crate::error::{ClientError, api_error};
use crate::error::{lost, timed_out};
use crate::limits::{Timeouts, Waited};
pub use crate::stream::{EventStream, StreamItem};
use bxcore::{ApprovalId, SessionId};
use bxhttp::client::{AnswerBody, ClientError as HttpError, Connection};
use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full};
use proto::api::{
    ApprovalAnswer, ApprovalAnswered, ApprovalList, CancelAnswer, CompactAnswer, MemoryList,
    NotificationList, RecordsPage, ScheduleInfo, ScheduleList, ScheduleStarted, SessionList,
    Status, TaskAccepted, TaskRequest, UsageReport, WebLink, WebRevoked,
};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where loopd's socket is installed.
pub const DEFAULT_SOCKET: &str = "/run/boxmaker/loopd.sock";

/// An answer as parsed, with its raw JSON text (for `--json`).
#[derive(Debug, Clone)]
pub struct Answer<T> {
    /// The parsed body.
    pub value: T,
    /// The body as loopd sent it.
    pub raw: String,
}

fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// When a request's answer head is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    /// Within the response timeout.
    Prompt,
    /// Once a turn starts, which a busy session may put off for long: waited for as long as
    /// loopd answers a status request within the response timeout.
    AtTurn,
}

/// A client of loopd at one socket.
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    timeouts: Timeouts,
}

impl Client {
    /// A client of loopd at `socket`, with the default limits.
    pub fn new(socket: impl Into<PathBuf>) -> Client {
        Client::with_timeouts(socket, Timeouts::default())
    }

    /// A client of loopd at `socket` that waits as long as `timeouts` says.
    pub fn with_timeouts(socket: impl Into<PathBuf>, timeouts: Timeouts) -> Client {
        Client {
            socket: socket.into(),
            timeouts,
        }
    }

    /// The socket it talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `future`, or [`ClientError::TimedOut`] once the limit for `waited` runs out.
    async fn within<F: Future>(&self, waited: Waited, future: F) -> Result<F::Output, ClientError> {
        let limit_ms = match waited {
            Waited::Connect => self.timeouts.connect_ms,
            Waited::Answer | Waited::Alive => self.timeouts.response_ms,
            Waited::Stream => self.timeouts.stream_idle_ms,
        };
        tokio::time::timeout(millis(limit_ms), future)
            .await
            .map_err(|_| timed_out(&self.socket, waited, limit_ms))
    }

    fn http_error(&self, e: HttpError) -> ClientError {
        match e {
            HttpError::Connect { socket, source } => ClientError::Unreachable {
                socket,
                kind: source.kind(),
                detail: source.to_string(),
            },
            other => lost(&self.socket, other),
        }
    }

    /// A new connection, within the connect timeout.
    async fn connect(&self) -> Result<Connection<Full<Bytes>>, ClientError> {
        self.within(Waited::Connect, Connection::open(&self.socket))
            .await?
            .map_err(|e| self.http_error(e))
    }

    /// `answer` (a request's answer head), however long it takes, as long as loopd shows it
    /// is alive: each time the wait passes the response timeout, a status request must be
    /// answered within it.
    async fn at_turn<F: Future>(&self, answer: F) -> Result<F::Output, ClientError> {
        tokio::pin!(answer);
        loop {
            if let Ok(head) =
                tokio::time::timeout(millis(self.timeouts.response_ms), &mut answer).await
            {
                return Ok(head);
            }
            tokio::select! {
                head = &mut answer => return Ok(head),
                alive = self.alive() => alive?,
            }
        }
    }

    /// Whether loopd answers a status request (any answer) within the response timeout.
    async fn alive(&self) -> Result<(), ClientError> {
        let request = request(Method::GET, "/v1/status", None, false)?;
        let connection = self.connect().await?;
        self.within(Waited::Alive, connection.send(request))
            .await?
            .map(drop)
            .map_err(|e| self.http_error(e))
    }

    /// Sends one request on a new connection; an error status becomes [`ClientError::Api`].
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        event_stream: bool,
        head: Head,
    ) -> Result<hyper::Response<AnswerBody>, ClientError> {
        let request = request(method, path, body, event_stream)?;
        let answer = self.connect().await?.send(request);
        let response = match head {
            Head::Prompt => self.within(Waited::Answer, answer).await?,
            Head::AtTurn => self.at_turn(answer).await?,
        }
        .map_err(|e| self.http_error(e))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let raw = self
            .within(Waited::Answer, self.read_text(response.into_body()))
            .await??;
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

    /// A request whose whole answer is one JSON body, due within the response timeout.
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Answer<T>, ClientError> {
        self.within(
            Waited::Answer,
            self.answer(method, path, body, Head::Prompt),
        )
        .await?
    }

    /// A request whose whole answer is one JSON body, its head due when `head` says, its body
    /// within the response timeout after that.
    async fn answer<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        head: Head,
    ) -> Result<Answer<T>, ClientError> {
        let response = self.send(method, path, body, false, head).await?;
        let raw = self
            .within(Waited::Answer, self.read_text(response.into_body()))
            .await??;
        let value =
            serde_json::from_str(&raw).map_err(|e| ClientError::Protocol(format!("{e}: {raw}")))?;
        Ok(Answer { value, raw })
    }

    async fn stream(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        head: Head,
    ) -> Result<EventStream, ClientError> {
        let response = self.send(method, path, body, true, head).await?;
        Ok(EventStream::new(
            self.socket.clone(),
            response.into_body(),
            self.timeouts.stream_idle_ms,
        ))
    }

    /// `POST /v1/tasks` without streaming: the turn runs on; its session and number. For a
    /// busy session loopd answers once the task's turn starts: waited for while loopd is
    /// alive ([`crate::limits`]).
    pub async fn submit(&self, task: &TaskRequest) -> Result<Answer<TaskAccepted>, ClientError> {
        self.answer(
            Method::POST,
            "/v1/tasks",
            Some(to_json(task)?),
            Head::AtTurn,
        )
        .await
    }

    /// `POST /v1/tasks`, streaming the turn's events until it ends. The stream starts once the
    /// task's turn does (waited for while loopd is alive, as for [`Client::submit`]).
    pub async fn submit_stream(&self, task: &TaskRequest) -> Result<EventStream, ClientError> {
        let body = Some(to_json(task)?);
        self.stream(Method::POST, "/v1/tasks", body, Head::AtTurn)
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
        let path = format!("/v1/sessions/{id}/events");
        self.stream(Method::GET, &path, None, Head::Prompt).await
    }

    /// `POST /v1/sessions/{id}/cancel`.
    pub async fn cancel(&self, id: &SessionId) -> Result<Answer<CancelAnswer>, ClientError> {
        self.call(Method::POST, &format!("/v1/sessions/{id}/cancel"), None)
            .await
    }

    /// `POST /v1/sessions/{id}/compact`: the session's new epoch. loopd answers once the
    /// tasks queued before it have run and the compaction is done: waited for while loopd is
    /// alive ([`crate::limits`]).
    pub async fn compact(&self, id: &SessionId) -> Result<Answer<CompactAnswer>, ClientError> {
        let path = format!("/v1/sessions/{id}/compact");
        self.answer(Method::POST, &path, None, Head::AtTurn).await
    }

    /// `POST /v1/sessions/{id}/undo`: the last `asked.turns` turns undone (or, dry, what
    /// would be put back). loopd answers once the tasks queued before it have run: waited for
    /// like a compaction.
    pub async fn undo(
        &self,
        id: &SessionId,
        asked: &proto::UndoTurns,
    ) -> Result<Answer<proto::UndoAnswer>, ClientError> {
        let path = format!("/v1/sessions/{id}/undo");
        let body = to_json(asked)?;
        self.answer(Method::POST, &path, Some(body), Head::AtTurn)
            .await
    }

    /// `POST /v1/sessions/{id}/fork`: a new session starting as a copy of this one. loopd
    /// answers once the tasks queued before it have run: waited for like a compaction.
    pub async fn fork(
        &self,
        id: &SessionId,
        asked: &proto::ForkRequest,
    ) -> Result<Answer<proto::ForkAnswer>, ClientError> {
        let path = format!("/v1/sessions/{id}/fork");
        let body = to_json(asked)?;
        self.answer(Method::POST, &path, Some(body), Head::AtTurn)
            .await
    }

    /// `GET /v1/sessions/{id}/diff[?turn=N]`: what the session's turns wrote, as diffs.
    pub async fn diff(
        &self,
        id: &SessionId,
        turn: Option<u64>,
    ) -> Result<Answer<proto::DiffAnswer>, ClientError> {
        let path = match turn {
            Some(turn) => format!("/v1/sessions/{id}/diff?turn={turn}"),
            None => format!("/v1/sessions/{id}/diff"),
        };
        self.call(Method::GET, &path, None).await
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
    /// Waited for like [`Client::submit`]: in a fixed session that is busy, the task may wait
    /// for the turn before it.
    pub async fn run_schedule(&self, name: &str) -> Result<Answer<ScheduleStarted>, ClientError> {
        let path = format!("/v1/schedules/{name}/run");
        self.answer(Method::POST, &path, None, Head::AtTurn).await
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

/// A request to loopd: JSON `body` when there is one, asking for an event stream when
/// `event_stream`.
fn request(
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
    event_stream: bool,
) -> Result<Request<Full<Bytes>>, ClientError> {
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
    request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| ClientError::Protocol(format!("cannot build the request: {e}")))
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Vec<u8>, ClientError> {
    serde_json::to_vec(value).map_err(|e| ClientError::Protocol(format!("cannot serialise: {e}")))
}
