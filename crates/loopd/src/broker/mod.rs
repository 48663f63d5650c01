//! brokerd as loopd's `ToolPort`: tool calls and the per-session catalogue over brokerd's
//! Unix socket (`POST /v1/call`, `GET /v1/catalogue?session=ID`, `GET /v1/health`).
//!
//! A broker that is down or slow never fails a turn: the model gets
//! `Failed("tool broker unavailable: ...")` and the turn goes on. Requests go out on kept-open
//! connections (`bxhttp::pool`), each at most once: a connection brokerd closed (its idle
//! timeout, a restart) is replaced before the request is sent, so a restarted brokerd is found
//! again on the next call, while a call that may have reached brokerd and got no answer fails
//! as unavailable and is never resent (a `write_file` must not run twice).
//!
//! Each turn asks for its session's catalogue with the version it holds ([`Catalogues`]):
//! brokerd answers `304` while that version is current, so the catalogue is neither sent nor
//! parsed again.

mod catalogues;

use crate::blocking::{Blocking, OnRuntimeThread};
use crate::tools::{PortRefusal, ToolPort};
use bxcore::SessionId;
use bxhttp::pool::{Answer, Pool};
pub use bxhttp::pool::{MAX_IDLE_CONNECTIONS, MAX_IDLE_MS};
use bytes::Bytes;
pub use catalogues::{Catalogues, MAX_HELD_CATALOGUES};
use http_body_util::Full;
use proto::{
    BrokerHealth, Catalogue, DiffAnswer, ToolRequest, ToolResponse, UndoAnswer, UndoRequest,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The largest answer read from brokerd, in bytes (its results are capped far below this).
pub const MAX_ANSWER_BYTES: usize = 16 << 20;
/// The longest a catalogue or health request may take, in milliseconds.
pub const PROBE_TIMEOUT_MS: u64 = 5_000;
/// How long loopd waits at its start for brokerd to answer, in milliseconds; past it loopd
/// serves anyway, and tool calls fail until brokerd answers.
pub const START_WAIT_MS: u64 = 5_000;
/// The longest pause between two of those tries, in milliseconds (they start 1 ms apart).
pub const MAX_UP_PAUSE_MS: u64 = 50;
/// What the model is told when brokerd cannot be reached; the reason follows.
pub const UNAVAILABLE: &str = "tool broker unavailable";
/// What a call brokerd had not answered when its turn was stopped gets: loopd stopped
/// waiting, and brokerd may have run it.
pub const STOPPED_DURING_CALL: &str =
    "not answered: the turn was stopped while brokerd ran this call, which may have run";

/// Why a request to brokerd got no answer.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// No connection, a broken one, or a timeout.
    #[error("{UNAVAILABLE}: {0}")]
    Unavailable(String),
    /// brokerd answered something loopd cannot read.
    #[error("tool broker answered {status}: {message}")]
    BadAnswer {
        /// The HTTP status.
        status: u16,
        /// What was wrong.
        message: String,
    },
    /// The request was waited for on a thread of the async runtime (a bug in loopd: see
    /// `blocking`); nothing was sent.
    #[error(transparent)]
    OnRuntimeThread(#[from] OnRuntimeThread),
}

/// A client of brokerd; its clones share its kept connections. Its own methods are async; as
/// a [`ToolPort`] (called from turn threads) it waits for them through its [`Blocking`].
#[derive(Debug, Clone)]
pub struct Broker {
    socket: PathBuf,
    call_timeout_ms: u64,
    blocking: Blocking,
    connections: Pool,
    catalogues: Arc<Catalogues>,
}

impl Broker {
    /// A client of brokerd at `socket`; calls are cut at `call_timeout_ms`. As a `ToolPort`
    /// it waits through `blocking`.
    pub fn new(socket: PathBuf, call_timeout_ms: u64, blocking: Blocking) -> Broker {
        Broker {
            connections: Pool::new(socket.clone(), "brokerd"),
            catalogues: Arc::default(),
            socket,
            call_timeout_ms,
            blocking,
        }
    }

    /// brokerd's socket.
    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// Its kept connections to brokerd, shared with its clones: the processes they reached
    /// ([`Pool::servers`]) are brokerd, as loopd's owner check knows it (`api::owner`).
    pub fn connections(&self) -> &Pool {
        &self.connections
    }

    /// The catalogues it holds, with their versions (shared with its clones).
    pub fn catalogues(&self) -> &Catalogues {
        &self.catalogues
    }

    /// The tools brokerd offers `session`: the catalogue held for it when brokerd says that
    /// version is current (`304`), else the one brokerd sends, held with its version.
    pub async fn catalogue(&self, session: &SessionId) -> Result<Catalogue, BrokerError> {
        let path = format!("/v1/catalogue?session={session}");
        let held = self.catalogues.held(session);
        let version = held.as_ref().map(|(version, _)| version.as_str());
        let answer = self
            .answer("GET", &path, None, version, PROBE_TIMEOUT_MS)
            .await?;
        if answer.status == http::StatusCode::NOT_MODIFIED.as_u16() {
            return match held {
                Some((_, catalogue)) => Ok(Catalogue::clone(&catalogue)),
                None => Err(BrokerError::BadAnswer {
                    status: answer.status,
                    message: "not modified, but loopd held no catalogue".into(),
                }),
            };
        }
        let version = answer
            .headers
            .get(http::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let catalogue: Catalogue =
            serde_json::from_slice(&ok_body(answer)?).map_err(|e| BrokerError::BadAnswer {
                status: 200,
                message: format!("not a catalogue: {e}"),
            })?;
        match version {
            Some(version) => {
                let held = Arc::new(catalogue.clone());
                self.catalogues.hold(session, version, held);
            }
            // A brokerd that sends no version: asked afresh every time.
            None => self.catalogues.forget(session),
        }
        Ok(catalogue)
    }

    /// brokerd's health answer: that it answers, and the walls of its `exec` tool (absent
    /// from a brokerd before issue 15, whose answer is a plain `{"status":"ok"}`).
    pub async fn health(&self) -> Result<BrokerHealth, BrokerError> {
        let body = self
            .exchange("GET", "/v1/health", None, PROBE_TIMEOUT_MS)
            .await?;
        serde_json::from_slice(&body).map_err(|e| BrokerError::BadAnswer {
            status: 200,
            message: format!("not a health answer: {e}"),
        })
    }

    /// brokerd's health answer, asked again until it answers or `wait_ms` have passed: a
    /// brokerd started beside loopd (boxd's `with_previous`) may bind its socket a few
    /// milliseconds after loopd asks. The last error when it never answered.
    pub async fn wait_up(&self, wait_ms: u64) -> Result<BrokerHealth, BrokerError> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        let mut pause_ms = 1;
        loop {
            let error = match self.health().await {
                Ok(health) => return Ok(health),
                Err(e) => e,
            };
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(error);
            }
            let pause = Duration::from_millis(pause_ms).min(deadline - now);
            tokio::time::sleep(pause).await;
            pause_ms = (pause_ms * 2).min(MAX_UP_PAUSE_MS);
        }
    }

    /// One call.
    pub async fn call(&self, request: &ToolRequest) -> Result<ToolResponse, BrokerError> {
        let body = serde_json::to_vec(request).map_err(|e| BrokerError::BadAnswer {
            status: 0,
            message: format!("cannot encode the request: {e}"),
        })?;
        let answer = self
            .exchange("POST", "/v1/call", Some(body), self.call_timeout_ms)
            .await?;
        serde_json::from_slice(&answer).map_err(|e| BrokerError::BadAnswer {
            status: 200,
            message: format!("not a tool response: {e}"),
        })
    }

    /// Undoes (or, dry, lists) what the session's turns from `request.from_turn` on wrote.
    pub async fn undo(&self, request: &UndoRequest) -> Result<UndoAnswer, BrokerError> {
        let body = serde_json::to_vec(request).map_err(|e| BrokerError::BadAnswer {
            status: 0,
            message: format!("cannot encode the request: {e}"),
        })?;
        let answer = self
            .exchange("POST", "/v1/undo", Some(body), self.call_timeout_ms)
            .await?;
        serde_json::from_slice(&answer).map_err(|e| BrokerError::BadAnswer {
            status: 200,
            message: format!("not an undo answer: {e}"),
        })
    }

    /// What `session`'s writes changed (only turn `turn`'s when given), as diffs.
    pub async fn diff(
        &self,
        session: &SessionId,
        turn: Option<u64>,
    ) -> Result<DiffAnswer, BrokerError> {
        let path = match turn {
            Some(turn) => format!("/v1/diff?session={session}&turn={turn}"),
            None => format!("/v1/diff?session={session}"),
        };
        let answer = self
            .exchange("GET", &path, None, self.call_timeout_ms)
            .await?;
        serde_json::from_slice(&answer).map_err(|e| BrokerError::BadAnswer {
            status: 200,
            message: format!("not a diff answer: {e}"),
        })
    }

    /// Sends one request (on a kept connection when one is open, at most once) and reads a
    /// 200 answer's body; the whole exchange is cut at `timeout_ms`.
    async fn exchange(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        timeout_ms: u64,
    ) -> Result<Bytes, BrokerError> {
        ok_body(self.answer(method, path, body, None, timeout_ms).await?)
    }

    /// Sends one request, with `If-None-Match: if_none_match` when given, and reads the whole
    /// answer, whatever its status; cut at `timeout_ms`.
    async fn answer(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
        if_none_match: Option<&str>,
        timeout_ms: u64,
    ) -> Result<Answer, BrokerError> {
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "brokerd")
            .header("content-type", "application/json");
        if let Some(version) = if_none_match {
            request = request.header(http::header::IF_NONE_MATCH, version);
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| BrokerError::Unavailable(e.to_string()))?;
        let sent = self.connections.send(request, MAX_ANSWER_BYTES);
        match tokio::time::timeout(Duration::from_millis(timeout_ms), sent).await {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(e)) => Err(BrokerError::Unavailable(e.to_string())),
            Err(_) => Err(BrokerError::Unavailable(format!(
                "no answer within {timeout_ms} ms"
            ))),
        }
    }
}

/// The body of a 200 answer; any other status is an error carrying the body's words (the
/// message of an error body brokerd wrote, else the body as it is).
fn ok_body(answer: Answer) -> Result<Bytes, BrokerError> {
    if answer.status != 200 {
        let message = serde_json::from_slice::<proto::api::ApiError>(&answer.body)
            .map(|e| e.error.message)
            .unwrap_or_else(|_| String::from_utf8_lossy(&answer.body).into_owned());
        return Err(BrokerError::BadAnswer {
            status: answer.status,
            message,
        });
    }
    Ok(answer.body)
}

/// The port's methods share the names of the async ones they wait for, so those are named by
/// their type (`Broker::call`) here.
impl ToolPort for Broker {
    fn catalogue(&self, session: &SessionId) -> Option<Catalogue> {
        match self.blocking.wait(Broker::catalogue(self, session)) {
            Ok(catalogue) => Some(catalogue),
            Err(e) => {
                tracing::warn!(%session, error = %e, "no catalogue from brokerd");
                None
            }
        }
    }

    fn call(&self, request: &ToolRequest) -> ToolResponse {
        self.call_until(request, &CancellationToken::new())
    }

    fn call_until(&self, request: &ToolRequest, stop: &CancellationToken) -> ToolResponse {
        let call = async {
            tokio::select! {
                answer = Broker::call(self, request) => answer.map(Some),
                () = stop.cancelled() => Ok(None),
            }
        };
        match self.blocking.wait(call) {
            Ok(Some(response)) => response,
            // Dropped like a call past its timeout: the request may have reached brokerd, so
            // it is never sent again, and the model is told it may have run.
            Ok(None) => {
                tracing::info!(session = %request.session, tool = %request.tool, "tool call given up: the turn was stopped");
                ToolResponse::failed(format!("{STOPPED_DURING_CALL} ({})", request.tool))
            }
            Err(e) => {
                tracing::warn!(session = %request.session, tool = %request.tool, error = %e, "tool call through brokerd failed");
                ToolResponse::failed(e.to_string())
            }
        }
    }

    fn undo(&self, request: &UndoRequest) -> Result<UndoAnswer, PortRefusal> {
        self.blocking
            .wait(Broker::undo(self, request))
            .map_err(refusal)
    }

    fn diff(&self, session: &SessionId, turn: Option<u64>) -> Result<DiffAnswer, PortRefusal> {
        self.blocking
            .wait(Broker::diff(self, session, turn))
            .map_err(refusal)
    }
}

/// brokerd's 409 (a file changed since, content no longer kept, writes not recorded) in its
/// own words; anything else as brokerd being unavailable.
fn refusal(error: BrokerError) -> PortRefusal {
    match error {
        BrokerError::BadAnswer {
            status: 409,
            message,
        } => PortRefusal::Conflict(message),
        other => PortRefusal::Unavailable(other.to_string()),
    }
}
