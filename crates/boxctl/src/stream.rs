//! A stream of turn events from loopd (server-sent events), watched for silence: loopd pings
//! an idle stream, so one that brings nothing for `Timeouts::stream_idle_ms` has a stuck loopd
//! behind it ([`crate::limits`]).

use crate::error::{ClientError, lost, timed_out};
use crate::limits::Waited;
use crate::sse::{SseItem, SseParser};
use bxcore::TurnEvent;
use bxhttp::client::AnswerBody;
use http_body_util::BodyExt;
use proto::api::SSE_EVENT_TURN;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

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

/// A stream of turn events from loopd, which must bring a byte at least every
/// `Timeouts::stream_idle_ms` (loopd pings an idle stream).
#[derive(Debug)]
pub struct EventStream {
    socket: PathBuf,
    body: AnswerBody,
    parser: SseParser,
    pending: VecDeque<SseItem>,
    idle_ms: u64,
    /// When the stream has been silent too long; kept here, not in `next`'s future, so that a
    /// `next` dropped for something else (the prompt's input) does not restart the count.
    silent_at: Instant,
}

impl EventStream {
    /// The stream of answer `body` from loopd at `socket`, silent for at most `idle_ms`.
    pub(crate) fn new(socket: PathBuf, body: AnswerBody, idle_ms: u64) -> EventStream {
        EventStream {
            socket,
            body,
            parser: SseParser::new(),
            pending: VecDeque::new(),
            idle_ms,
            silent_at: Instant::now() + Duration::from_millis(idle_ms),
        }
    }

    /// The next item; `None` when loopd ended the stream; [`ClientError::TimedOut`] when it
    /// brought nothing, not even a ping, for `Timeouts::stream_idle_ms`. Cancel-safe.
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
            let frame = match tokio::time::timeout_at(self.silent_at, self.body.frame()).await {
                Err(_) => return Err(timed_out(&self.socket, Waited::Stream, self.idle_ms)),
                Ok(None) => return Ok(None),
                Ok(Some(frame)) => frame,
            };
            self.silent_at = Instant::now() + Duration::from_millis(self.idle_ms);
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
