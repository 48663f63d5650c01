//! Server-sent events: turn events as `event: turn` frames, `: ping` comments on idle
//! streams, and a comment when a follower fell behind and missed events.

use super::body::Body;
use bxcore::TurnEvent;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Frame;
use proto::api::{SSE_EVENT_TURN, SSE_PING_COMMENT};
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, watch};

/// How many frames may wait between a stream's producer and its connection.
const SSE_BUFFER_FRAMES: usize = 64;

/// One turn event as an SSE frame: `event: turn\ndata: <JSON>\n\n`.
pub fn turn_frame(event: &TurnEvent) -> Bytes {
    // TurnEvent's fields are strings, numbers and enums: serialising cannot fail, and
    // serde_json's compact form has no newline, so the data is one line.
    let json = serde_json::to_string(event).unwrap_or_else(|e| {
        tracing::error!("cannot serialise a turn event: {e}");
        String::from("null")
    });
    Bytes::from(format!("event: {SSE_EVENT_TURN}\ndata: {json}\n\n"))
}

/// An SSE comment frame (`: text\n\n`); clients skip it. Newlines in `text` become spaces.
pub fn comment_frame(text: &str) -> Bytes {
    Bytes::from(format!(": {}\n\n", text.replace(['\r', '\n'], " ")))
}

/// A response body fed by a producer task through a bounded channel; dropping it (the client
/// went away) makes the producer's next send fail, and so stop.
struct SseBody {
    frames: mpsc::Receiver<Bytes>,
}

impl hyper::body::Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.frames
            .poll_recv(cx)
            .map(|frame| frame.map(|bytes| Ok(Frame::data(bytes))))
    }
}

fn sse_response(frames: mpsc::Receiver<Bytes>) -> Response<Body> {
    let mut response = Response::new(SseBody { frames }.boxed());
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// What a producer does next.
enum Next {
    Send(Bytes),
    End,
}

/// Where a stream's frames come from.
trait Source: Send + 'static {
    /// The next frame, or the end of the stream. Must be cancel-safe: a ping interrupts it.
    fn next(&mut self) -> impl Future<Output = Next> + Send;
}

impl Source for mpsc::UnboundedReceiver<TurnEvent> {
    async fn next(&mut self) -> Next {
        match self.recv().await {
            Some(event) => Next::Send(turn_frame(&event)),
            None => Next::End,
        }
    }
}

impl Source for broadcast::Receiver<TurnEvent> {
    async fn next(&mut self) -> Next {
        match self.recv().await {
            Ok(event) => Next::Send(turn_frame(&event)),
            Err(broadcast::error::RecvError::Lagged(skipped)) => Next::Send(comment_frame(
                &format!("skipped {skipped} events: this follower fell behind"),
            )),
            Err(broadcast::error::RecvError::Closed) => Next::End,
        }
    }
}

/// Sends `source`'s frames until it ends, the client goes away or the server stops; a ping
/// goes out whenever nothing did for `ping_ms`. The source is looked at first: at shutdown
/// the turns have ended before the server stops, and a frame already waiting (a turn's
/// `ended`) still goes out before the stream ends.
async fn produce<S: Source>(
    mut source: S,
    frames: mpsc::Sender<Bytes>,
    ping_ms: u64,
    shutdown: watch::Receiver<bool>,
) {
    let stopped = super::routes::stopping(shutdown);
    tokio::pin!(stopped);
    let ping = Duration::from_millis(ping_ms.max(1));
    loop {
        let frame = tokio::select! {
            biased;
            next = tokio::time::timeout(ping, source.next()) => match next {
                Ok(Next::Send(frame)) => frame,
                Ok(Next::End) => return,
                Err(_) => comment_frame(SSE_PING_COMMENT),
            },
            () = &mut stopped => return,
            () = frames.closed() => return,
        };
        if frames.send(frame).await.is_err() {
            return;
        }
    }
}

/// A 200 SSE answer streaming one turn's events until the channel closes (after `Ended`).
pub(crate) fn task_stream(
    events: mpsc::UnboundedReceiver<TurnEvent>,
    ping_ms: u64,
    shutdown: watch::Receiver<bool>,
) -> Response<Body> {
    let (tx, rx) = mpsc::channel(SSE_BUFFER_FRAMES);
    tokio::spawn(produce(events, tx, ping_ms, shutdown));
    sse_response(rx)
}

/// A 200 SSE answer following a session's events until the sender goes away; a follower
/// that fell behind gets a comment saying how many events it missed, and goes on.
pub(crate) fn follow_stream(
    events: broadcast::Receiver<TurnEvent>,
    ping_ms: u64,
    shutdown: watch::Receiver<bool>,
) -> Response<Body> {
    let (tx, rx) = mpsc::channel(SSE_BUFFER_FRAMES);
    tokio::spawn(produce(events, tx, ping_ms, shutdown));
    sse_response(rx)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bxcore::TurnEnd;

    #[test]
    fn a_turn_frame_is_one_named_event_with_one_data_line() {
        let frame = turn_frame(&TurnEvent::Content {
            text: "a\nb".into(),
        });
        assert_eq!(
            &frame[..],
            b"event: turn\ndata: {\"type\":\"content\",\"text\":\"a\\nb\"}\n\n"
        );
        let end = turn_frame(&TurnEvent::Ended {
            turn: 2,
            end: TurnEnd::Done,
            context: Default::default(),
        });
        assert!(end.ends_with(
            b"\"end\":\"done\",\"context\":{\"class\":\"public\",\"untrusted\":false}}\n\n"
        ));
    }

    #[test]
    fn a_comment_frame_stays_one_line() {
        assert_eq!(&comment_frame("ping")[..], b": ping\n\n");
        assert_eq!(&comment_frame("a\nb")[..], b": a b\n\n");
    }
}
