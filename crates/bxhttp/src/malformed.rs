//! Requests hyper cannot read. hyper answers a head it cannot parse (400), a URI too long
//! (414) or a head too large (431) by itself, with an empty body, and no hook lets a server
//! change that answer. So the connection's socket passes through [`Withhold`], which holds
//! back exactly hyper's automatic answer (and dups the socket to answer on); once hyper has
//! given up on the connection, [`answer`] sends the [`crate::Handler::malformed`] answer,
//! with the daemon's error body, in its place.

use crate::listener::Stream;
use crate::{MAX_HEAD_BYTES, MAX_HEADER_FIELDS, MAX_URI_BYTES};
use http::{HeaderMap, Response, StatusCode, header};
use http_body_util::BodyExt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};

/// The statuses hyper answers by itself when it cannot read a request.
const AUTOMATIC: [StatusCode; 3] = [
    StatusCode::BAD_REQUEST,
    StatusCode::URI_TOO_LONG,
    StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
];

/// The longest automatic answer of hyper's, in bytes (status line, three short fields): a
/// longer write is never one.
const AUTOMATIC_MAX_BYTES: usize = 256;

/// What [`Withhold`] held back: the status hyper answered and a second descriptor of the
/// socket to send the handler's answer on. Shared with the connection's task.
#[derive(Debug, Default)]
pub(crate) struct Withheld {
    held: Mutex<Option<(StatusCode, OwnedFd)>>,
    /// Answers of the handler's own that look like hyper's automatic ones (an empty 400, 414
    /// or 431 with no field of its own), not yet written: they go out as they are.
    lookalikes: AtomicUsize,
}

impl Withheld {
    /// Notes an answer of the handler's before hyper writes it, so that one that looks like
    /// hyper's own is not taken for it.
    pub fn handler_answers<B: hyper::body::Body>(&self, response: &Response<B>) {
        let empty = response.body().size_hint().exact() == Some(0);
        if AUTOMATIC.contains(&response.status()) && empty && response.headers().is_empty() {
            self.lookalikes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// What was held back, if anything.
    pub fn take(&self) -> Option<(StatusCode, OwnedFd)> {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    fn is_held(&self) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Whether `bytes`, about to be written, are hyper's automatic answer to hold back: an
    /// answer that looks like one is, unless the handler gave one like it that is not written
    /// yet (hyper writes answers in order, so that one is this one).
    fn holds_back(&self, bytes: &[u8]) -> Option<StatusCode> {
        let status = automatic_status(bytes)?;
        let lookalike = self
            .lookalikes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        (!lookalike).then_some(status)
    }
}

/// The status of `bytes` when they are exactly an answer like hyper's automatic ones: a status
/// line of [`AUTOMATIC`], then `connection: close` (hyper's always has it), `content-length:
/// 0` and a `date` (each optional, in that order), and nothing else.
fn automatic_status(bytes: &[u8]) -> Option<StatusCode> {
    if bytes.len() > AUTOMATIC_MAX_BYTES {
        return None;
    }
    let head = std::str::from_utf8(bytes).ok()?.strip_suffix("\r\n\r\n")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?;
    let status = AUTOMATIC.into_iter().find(|s| {
        let reason = s.canonical_reason().unwrap_or_default();
        status_line == format!("HTTP/1.1 {} {reason}", s.as_u16())
    })?;
    let mut fields = lines.peekable();
    fields.next_if_eq(&"connection: close");
    fields.next_if_eq(&"content-length: 0");
    fields.next_if(|f| f.starts_with("date: "));
    fields.next().is_none().then_some(status)
}

/// A connection's socket that holds back hyper's automatic answer to a request it cannot
/// read (see the module's documentation); everything else passes through.
pub(crate) struct Withhold<S> {
    inner: S,
    withheld: Arc<Withheld>,
}

impl<S: AsFd> Withhold<S> {
    pub fn new(inner: S, withheld: Arc<Withheld>) -> Withhold<S> {
        Withhold { inner, withheld }
    }

    /// Holds `bytes` back when they are hyper's automatic answer and the socket can be
    /// dupped to answer on instead; `Some(n)`: "written".
    fn hold(&self, bytes: &[u8]) -> Option<usize> {
        if self.withheld.is_held() {
            // hyper gave up on the connection: nothing more goes out its way.
            return Some(bytes.len());
        }
        let status = self.withheld.holds_back(bytes)?;
        match self.inner.as_fd().try_clone_to_owned() {
            Ok(fd) => {
                *self.withheld.held.lock().unwrap_or_else(|p| p.into_inner()) = Some((status, fd));
                Some(bytes.len())
            }
            Err(e) => {
                tracing::debug!("cannot dup the socket to answer a malformed request: {e}");
                None
            }
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Withhold<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + AsFd + Unpin> AsyncWrite for Withhold<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(n) = self.hold(buf) {
            return Poll::Ready(Ok(n));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total <= AUTOMATIC_MAX_BYTES {
            let joined: Vec<u8> = bufs.iter().flat_map(|b| b.iter().copied()).collect();
            if let Some(n) = self.hold(&joined) {
                return Poll::Ready(Ok(n));
            }
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.withheld.is_held() {
            // A shutdown would close the socket under the answer still to be sent.
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// What was wrong with a request hyper answered `status`, for the answer's message; `error`
/// is hyper's, when it gave one.
pub(crate) fn why(status: StatusCode, error: Option<&hyper::Error>) -> String {
    match status {
        StatusCode::URI_TOO_LONG => {
            format!("the request's URI is longer than {MAX_URI_BYTES} bytes")
        }
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => format!(
            "the request head is larger than {MAX_HEAD_BYTES} bytes \
             or has more than {MAX_HEADER_FIELDS} header fields"
        ),
        _ => match error {
            Some(e) => format!("the request is not valid HTTP/1.1: {e}"),
            None => "the request is not valid HTTP/1.1".to_string(),
        },
    }
}

/// Sends `response` on `fd` (a socket of kind `S`) as a whole HTTP/1.1 answer that closes
/// the connection, within `timeout`; a failure is only logged (the peer is gone or does not
/// read).
pub(crate) async fn answer<S, B>(fd: OwnedFd, response: Response<B>, timeout: Duration, name: &str)
where
    S: Stream,
    B: hyper::body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let sent = tokio::time::timeout(timeout, async {
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| io::Error::other(e.into()))?
            .to_bytes();
        let mut bytes = head(parts.status, &parts.headers, body.len());
        bytes.extend_from_slice(&body);
        let mut stream = S::from_dup(fd)?;
        stream.write_all(&bytes).await?;
        stream.shutdown().await
    })
    .await;
    match sent {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::debug!(server = name, "cannot answer a malformed request: {e}"),
        Err(_) => tracing::debug!(server = name, "answering a malformed request timed out"),
    }
}

/// The head of an answer of `status` with `headers` and a body of `len` bytes, which closes
/// the connection. Framing fields of the handler's are replaced by the true ones.
fn head(status: StatusCode, headers: &HeaderMap, len: usize) -> Vec<u8> {
    let reason = status.canonical_reason().unwrap_or_default();
    let mut bytes = format!("HTTP/1.1 {} {reason}\r\n", status.as_u16()).into_bytes();
    let framing = [
        header::CONTENT_LENGTH,
        header::TRANSFER_ENCODING,
        header::CONNECTION,
    ];
    for (name, value) in headers {
        if framing.contains(name) {
            continue;
        }
        bytes.extend_from_slice(name.as_str().as_bytes());
        bytes.extend_from_slice(b": ");
        bytes.extend_from_slice(value.as_bytes());
        bytes.extend_from_slice(b"\r\n");
    }
    bytes.extend_from_slice(
        format!("content-length: {len}\r\nconnection: close\r\n\r\n").as_bytes(),
    );
    bytes
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const HYPERS_431: &[u8] = b"HTTP/1.1 431 Request Header Fields Too Large\r\n\
        connection: close\r\ncontent-length: 0\r\ndate: Mon, 30 Nov 2026 18:53:51 GMT\r\n\r\n";

    #[test]
    fn only_hypers_automatic_answers_are_recognised() {
        assert_eq!(
            automatic_status(HYPERS_431),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\
            content-length: 2\r\ndate: Mon, 30 Nov 2026 18:53:51 GMT\r\n\r\n{}";
        assert_eq!(automatic_status(with_body), None);
        let ok = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\
            date: Mon, 30 Nov 2026 18:53:51 GMT\r\n\r\n";
        assert_eq!(automatic_status(ok), None);
        // A handler's empty 400 on a connection kept alive looks like one too.
        let kept_alive = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\
            date: Mon, 30 Nov 2026 18:53:51 GMT\r\n\r\n";
        assert_eq!(automatic_status(kept_alive), Some(StatusCode::BAD_REQUEST));
    }

    #[test]
    fn a_lookalike_of_the_handlers_is_let_through_once() {
        let withheld = Withheld::default();
        let lookalike = Response::builder()
            .status(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        withheld.handler_answers(&lookalike);
        assert_eq!(withheld.holds_back(HYPERS_431), None);
        assert_eq!(
            withheld.holds_back(HYPERS_431),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
    }

    #[test]
    fn the_answer_head_carries_the_handlers_fields_and_true_framing() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, "application/json".parse().unwrap());
        headers.insert(header::CONTENT_LENGTH, "999".parse().unwrap());
        let head = String::from_utf8(head(StatusCode::URI_TOO_LONG, &headers, 12)).unwrap();
        assert_eq!(
            head,
            "HTTP/1.1 414 URI Too Long\r\ncontent-type: application/json\r\n\
             content-length: 12\r\nconnection: close\r\n\r\n"
        );
    }
}
