//! Answering a connection once and closing it: a refused peer's 403, and the 503 of a
//! connection past the cap. The request head is read first (a client such as hyper's takes
//! bytes that come before its request is sent for an error, not an answer), then the answer
//! goes out, and the close lingers ([`LINGER_MS`]): the server shuts its side and reads until
//! the peer closes, so that a request body left unread does not turn the close into a reset.

use crate::listener::Stream;
use crate::{CLOSING_ANSWER_TIMEOUT_MS, LINGER_MS};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// The most bytes read at a time while lingering (they are dropped).
const LINGER_CHUNK_BYTES: usize = 8192;

/// Reads one request on `stream` with `builder` (its header-read timeout bounds the wait for
/// the head), answers it with `answer()` and closes, lingering; all within
/// [`CLOSING_ANSWER_TIMEOUT_MS`]. `name` says which server in the logs.
pub(crate) async fn answer_and_close<S: Stream, B>(
    stream: S,
    answer: impl Fn() -> Response<B> + Send + 'static,
    builder: &http1::Builder,
    name: &'static str,
) where
    B: hyper::body::Body<Data: Send, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + 'static,
{
    let deadline = Instant::now() + Duration::from_millis(CLOSING_ANSWER_TIMEOUT_MS);
    let service = service_fn(move |_request: Request<Incoming>| {
        let response = answer();
        async move { Ok::<_, Infallible>(response) }
    });
    // Without shutdown: the connection comes back once the answer is written, to linger on.
    let conn = builder
        .clone()
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service)
        .without_shutdown();
    match tokio::time::timeout_at(deadline, conn).await {
        Ok(Ok(parts)) => linger(parts.io.into_inner(), deadline, name).await,
        Ok(Err(e)) => tracing::debug!(server = name, "answered connection ended: {e}"),
        Err(_) => tracing::debug!(server = name, "answered connection timed out"),
    }
}

/// Shuts the server's side of `stream` (the peer reads the answer, then its end) and reads
/// what the peer still sends, dropping it, until the peer closes, [`LINGER_MS`] pass or
/// `deadline` comes; then the socket closes with nothing unread in it.
async fn linger<S: Stream>(mut stream: S, deadline: Instant, name: &'static str) {
    if let Err(e) = stream.shutdown().await {
        tracing::debug!(server = name, "cannot shut the answered connection: {e}");
        return;
    }
    let until = deadline.min(Instant::now() + Duration::from_millis(LINGER_MS));
    let drained = tokio::time::timeout_at(until, async {
        let mut dropped = [0u8; LINGER_CHUNK_BYTES];
        while matches!(stream.read(&mut dropped).await, Ok(n) if n > 0) {}
    })
    .await;
    if drained.is_err() {
        tracing::debug!(
            server = name,
            linger_ms = LINGER_MS,
            "the peer did not close after its answer; closing"
        );
    }
}
