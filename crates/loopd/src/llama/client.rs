//! The client: one streamed chat completion per try, retries with backoff, `/health`,
//! `/props`, and waiting for a loading server.
//!
//! Async only: turn threads wait for its futures through `crate::blocking::Blocking`, the one
//! blocking adapter.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::time::Instant;

use super::error::InferError;
use super::faults::Faults;
use super::kept::Kept;
use super::message::{ChatEvent, ChatRequest, Completion};
pub use super::options::ClientOptions;
use super::props::{Health, ServerInfo};
use super::retry::{backoff_ms, wait_unless_cancelled};
use super::slot_files::{Restored, Saved};
use super::sse::{SseEvent, SseParser};
use super::stream::{Assembler, Progress};
use super::transport::{self, Exchange, Outgoing, Reusable};
use super::wire;
use tokio_util::sync::CancellationToken;

/// The chat completions endpoint.
const CHAT_PATH: &str = "/v1/chat/completions";
/// The health endpoint (no API key needed).
const HEALTH_PATH: &str = "/health";
/// The server properties endpoint.
const PROPS_PATH: &str = "/props";
/// The longest a `/health` or `/props` request may take, in milliseconds.
pub const PROBE_TIMEOUT_MS: u64 = 10_000;
/// How often [`Client::wait_until_ready`] asks `/health`, in milliseconds.
pub const HEALTH_POLL_INTERVAL_MS: u64 = 100;
/// The largest error answer read, in bytes.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// The largest `/health` or `/props` answer read, in bytes (`/props` holds the chat template).
const MAX_PROBE_BODY_BYTES: usize = 4 * 1024 * 1024;

/// A llama-server client. Cheap to share: `Send + Sync`. Its clones (and
/// [`Client::with_max_tokens`]) share one [`Faults`] and the connections it keeps open between
/// requests (`kept`).
///
/// Nothing it logs holds a prompt or an answer's text, at any level.
#[derive(Debug, Clone)]
pub struct Client {
    options: ClientOptions,
    /// What it saw go wrong with the endpoint.
    faults: Arc<Faults>,
    /// Its connections waiting for the next chat or probe.
    kept: Kept,
}

/// The longest the rest of a streamed answer is read after its `[DONE]`, in milliseconds,
/// so that its connection can be kept; past it the connection is closed. A server writes the
/// body's end with its last event, so this is a bound the turn never waits out.
const DRAIN_AFTER_DONE_MS: u64 = 20;

fn stream_error(message: String) -> InferError {
    InferError::Stream {
        kind: None,
        message,
    }
}

impl Client {
    /// A client with `options`, its endpoint not (yet) failing.
    pub fn new(options: ClientOptions) -> Client {
        Client {
            options,
            faults: Arc::new(Faults::default()),
            kept: Kept::default(),
        }
    }

    /// The options it was made with.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// What it saw go wrong with its endpoint: the final outcome of each chat (after its
    /// retries), probe (`/health`, `/props`) and measure is recorded here; shared by its
    /// clones.
    pub fn faults(&self) -> &Arc<Faults> {
        &self.faults
    }

    /// One try of a streamed chat completion: content and reasoning deltas go to `on_event`
    /// as they arrive. Cancelling `cancelled` ends it at once with
    /// [`InferError::Cancelled`] (the connection is closed).
    pub async fn chat<F>(
        &self,
        request: &ChatRequest,
        on_event: &mut F,
        cancelled: &CancellationToken,
    ) -> Result<Completion, InferError>
    where
        F: FnMut(&ChatEvent) + ?Sized,
    {
        let mut streamed = false;
        let outcome = self
            .chat_once(request, on_event, cancelled, &mut streamed)
            .await;
        self.faults.note(&outcome);
        outcome
    }

    /// [`Client::chat`], retried on 503 and connection errors with bounded exponential
    /// backoff, each failed try reported as [`ChatEvent::Attempt`]; it stops, also while
    /// waiting between tries, once `cancelled` is cancelled.
    pub async fn chat_with_retry<F>(
        &self,
        request: &ChatRequest,
        on_event: &mut F,
        cancelled: &CancellationToken,
    ) -> Result<Completion, InferError>
    where
        F: FnMut(&ChatEvent) + ?Sized,
    {
        let outcome = self.chat_retrying(request, on_event, cancelled).await;
        self.faults.note(&outcome);
        outcome
    }

    /// The tokens of the prompt `request` would be rendered into, as llama-server counts them
    /// (`/apply-template`, then `/tokenize`), without running it.
    pub async fn prompt_tokens(&self, request: &ChatRequest) -> Result<u32, InferError> {
        let outcome = super::measure::prompt_tokens(&self.options, &self.kept, request).await;
        self.faults.note(&outcome);
        outcome
    }

    /// The tokens of `text` alone, as llama-server's tokeniser counts them (`/tokenize`).
    pub async fn text_tokens(&self, text: &str) -> Result<u32, InferError> {
        let outcome = super::measure::text_tokens(&self.options, &self.kept, text).await;
        self.faults.note(&outcome);
        outcome
    }

    /// The same client with answers of at most `max_tokens` tokens (a compaction's answer is
    /// bounded apart from a turn's); it shares this one's [`Faults`].
    pub fn with_max_tokens(&self, max_tokens: u32) -> Client {
        let mut options = self.options.clone();
        options.max_tokens = Some(max_tokens);
        Client {
            options,
            faults: Arc::clone(&self.faults),
            kept: self.kept.clone(),
        }
    }

    /// Saves slot `slot`'s KV cache to `filename` in the server's `--slot-save-path`.
    pub async fn save_slot(&self, slot: u32, filename: &str) -> Result<Saved, InferError> {
        super::slot_files::save(&self.options, &self.kept, slot, filename).await
    }

    /// Fills slot `slot`'s KV cache from `filename` in the server's `--slot-save-path`; a
    /// failure leaves the slot empty (the turn then prefills its whole prompt).
    pub async fn restore_slot(&self, slot: u32, filename: &str) -> Result<Restored, InferError> {
        super::slot_files::restore(&self.options, &self.kept, slot, filename).await
    }

    /// Asks `/health`. Probes leave [`Client::faults`] alone: those are what calls met (the
    /// router keeps what its looks find apart, `route`), and a good answer must not clear
    /// them: a server whose calls stall (a hung GPU) may still answer `/health`.
    pub async fn health(&self) -> Result<Health, InferError> {
        self.ask_health().await
    }

    /// Reads `/props` (leaving [`Client::faults`] alone, as [`Client::health`]).
    pub async fn props(&self) -> Result<ServerInfo, InferError> {
        self.ask_props().await
    }

    async fn ask_health(&self) -> Result<Health, InferError> {
        let exchange = self.probe(HEALTH_PATH).await?;
        let (status, body) = transport::read_answer(exchange, MAX_ERROR_BODY_BYTES).await?;
        if status == 200 {
            return Ok(Health::Ok);
        }
        match InferError::from_answer(status, &body) {
            InferError::Unavailable { message } => Ok(Health::Loading { message }),
            other => Err(other),
        }
    }

    async fn ask_props(&self) -> Result<ServerInfo, InferError> {
        let exchange = self.probe(PROPS_PATH).await?;
        let (status, body) = transport::read_answer(exchange, MAX_PROBE_BODY_BYTES).await?;
        if status != 200 {
            return Err(InferError::from_answer(status, &body));
        }
        ServerInfo::from_props(&body)
    }

    /// Waits up to `health_wait_ms` while `/health` says the model is loading or the
    /// connection is refused (asking every [`HEALTH_POLL_INTERVAL_MS`]), then reads `/props`.
    pub async fn wait_until_ready(&self, health_wait_ms: u64) -> Result<ServerInfo, InferError> {
        let deadline = Instant::now() + Duration::from_millis(health_wait_ms);
        let mut reported = false;
        loop {
            let why = match self.health().await {
                Ok(Health::Ok) => break,
                Ok(Health::Loading { message }) => InferError::Unavailable { message },
                Err(e @ InferError::Connect { .. }) => e,
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            if now >= deadline {
                let waited = format!("still so after waiting {health_wait_ms} ms");
                return Err(match why {
                    InferError::Unavailable { message } => InferError::Unavailable {
                        message: format!("{message} ({waited})"),
                    },
                    InferError::Connect { url, message } => InferError::Connect {
                        url,
                        message: format!("{message} ({waited})"),
                    },
                    other => other,
                });
            }
            if !reported {
                tracing::info!(error = %why, health_wait_ms, "waiting for llama-server");
                reported = true;
            }
            let step = Duration::from_millis(HEALTH_POLL_INTERVAL_MS).min(deadline - now);
            tokio::time::sleep(step).await;
        }
        let info = self.props().await?;
        // Ready at start: what the wait for it recorded (loading, refused) is over.
        self.faults.clear();
        tracing::info!(
            n_ctx = info.n_ctx,
            slots = info.total_slots,
            model = %info.model,
            build = %info.build_info,
            "llama-server is ready"
        );
        Ok(info)
    }

    /// A GET within [`PROBE_TIMEOUT_MS`].
    async fn probe(&self, path: &str) -> Result<Exchange, InferError> {
        let outgoing = Outgoing {
            method: Method::GET,
            path,
            body: None,
            event_stream: false,
            api_key: self.options.api_key.as_deref(),
        };
        let send = transport::send(&self.options, &self.kept, PROBE_TIMEOUT_MS, outgoing);
        tokio::time::timeout(Duration::from_millis(PROBE_TIMEOUT_MS), send)
            .await
            .unwrap_or(Err(InferError::Timeout {
                after_ms: PROBE_TIMEOUT_MS,
            }))
    }

    async fn chat_retrying<F>(
        &self,
        request: &ChatRequest,
        on_event: &mut F,
        cancelled: &CancellationToken,
    ) -> Result<Completion, InferError>
    where
        F: FnMut(&ChatEvent) + ?Sized,
    {
        let max_attempts = self.options.retry_max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let mut streamed = false;
            let error = match self
                .chat_once(request, &mut *on_event, cancelled, &mut streamed)
                .await
            {
                Ok(done) => return Ok(done),
                Err(e) => e,
            };
            if error == InferError::Cancelled {
                tracing::debug!(attempt, "llama-server call cancelled");
                return Err(error);
            }
            if !error.is_retryable() || streamed || attempt >= max_attempts {
                tracing::warn!(attempt, streamed, error = %error, "llama-server call failed");
                return Err(error);
            }
            let delay_ms = backoff_ms(
                attempt,
                self.options.retry_initial_backoff_ms,
                self.options.retry_max_backoff_ms,
            );
            tracing::info!(attempt, delay_ms, error = %error, "llama-server call failed; retrying");
            on_event(&ChatEvent::Attempt {
                attempt,
                delay_ms,
                error: error.to_string(),
            });
            if !wait_unless_cancelled(delay_ms, cancelled).await {
                return Err(InferError::Cancelled);
            }
            attempt += 1;
        }
    }

    /// One try, bounded by `request_timeout_ms` (and by `stall_timeout_ms` between bytes) and
    /// ended early by `cancelled`. `streamed` tells whether any output reached `on_event` (a
    /// retry would then duplicate it).
    async fn chat_once<F>(
        &self,
        request: &ChatRequest,
        on_event: &mut F,
        cancelled: &CancellationToken,
        streamed: &mut bool,
    ) -> Result<Completion, InferError>
    where
        F: FnMut(&ChatEvent) + ?Sized,
    {
        if cancelled.is_cancelled() {
            return Err(InferError::Cancelled);
        }
        let body = wire::chat_body(request, self.options.max_tokens)
            .map_err(|message| InferError::BadConfig { message })?;
        let limit_ms = self.options.request_timeout_ms;
        // Sizes only: the messages are the prompt, which is never logged.
        tracing::debug!(
            url = %self.options.endpoint,
            slot = request.slot,
            messages = request.messages.len(),
            tools = request.tools.len(),
            body_bytes = body.len(),
            "llama-server call"
        );
        let outcome = tokio::select! {
            result = self.stream_chat(body, on_event, cancelled, streamed) => result,
            () = cancelled.cancelled() => Err(InferError::Cancelled),
            () = tokio::time::sleep(Duration::from_millis(limit_ms)) => {
                Err(InferError::Timeout { after_ms: limit_ms })
            }
        };
        if let Ok(done) = &outcome {
            tracing::debug!(
                finish_reason = %done.finish_reason,
                prompt_tokens = done.usage.prompt_tokens,
                completion_tokens = done.usage.completion_tokens,
                tool_calls = done.tool_calls.len(),
                "llama-server answered"
            );
        }
        outcome
    }

    async fn stream_chat<F>(
        &self,
        body: Vec<u8>,
        on_event: &mut F,
        cancelled: &CancellationToken,
        streamed: &mut bool,
    ) -> Result<Completion, InferError>
    where
        F: FnMut(&ChatEvent) + ?Sized,
    {
        let outgoing = Outgoing {
            method: Method::POST,
            path: CHAT_PATH,
            body: Some(body),
            event_stream: true,
            api_key: self.options.api_key.as_deref(),
        };
        let stall_ms = self.options.stall_timeout_ms;
        let exchange = transport::send(&self.options, &self.kept, stall_ms, outgoing).await?;
        let status = exchange.status;
        if !(200..300).contains(&status) {
            let (_, body) = transport::read_answer(exchange, MAX_ERROR_BODY_BYTES).await?;
            return Err(InferError::from_answer(status, &body));
        }
        let Exchange {
            mut body,
            connection,
            ..
        } = exchange;
        let mut parser = SseParser::new();
        let mut assembler = Assembler::new();
        let mut events = Vec::new();
        loop {
            let next = tokio::time::timeout(Duration::from_millis(stall_ms), body.frame());
            let Ok(next) = next.await else {
                return Err(InferError::Stalled { after_ms: stall_ms });
            };
            let frame = match next {
                None if parser.is_mid_event() => {
                    return Err(stream_error(
                        "the stream ended in the middle of an event".into(),
                    ));
                }
                None => return Err(stream_error("the stream ended without [DONE]".into())),
                Some(Err(e)) => {
                    return Err(stream_error(format!(
                        "the connection broke mid-answer ({e})"
                    )));
                }
                Some(Ok(frame)) => frame,
            };
            if cancelled.is_cancelled() {
                return Err(InferError::Cancelled);
            }
            let Ok(bytes) = frame.into_data() else {
                continue;
            };
            parser
                .push(&bytes, &mut events)
                .map_err(|e| stream_error(e.to_string()))?;
            for event in events.drain(..) {
                let progress = match event {
                    SseEvent::Data(data) => assembler.data(&data, on_event),
                    SseEvent::Error(value) => Err(assembler.error_event(&value)),
                };
                *streamed = assembler.has_streamed();
                if progress? == Progress::Done {
                    keep_after_done(body, connection).await;
                    return Ok(assembler.finish());
                }
            }
        }
    }
}

/// Reads what is left of a streamed answer after its `[DONE]` (the end of the chunked body,
/// written with it; at most [`DRAIN_AFTER_DONE_MS`]) and, when it ended cleanly, keeps the
/// connection.
async fn keep_after_done(mut body: Incoming, connection: Reusable) {
    let rest = async {
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                return false;
            }
        }
        true
    };
    let drained = tokio::time::timeout(Duration::from_millis(DRAIN_AFTER_DONE_MS), rest).await;
    if drained == Ok(true) {
        connection.keep();
    }
}
