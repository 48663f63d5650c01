//! A test handler with routes that answer at once, wait to be released, work for a while,
//! read a body, send a large answer or stream with gaps; a served instance of it; raw and
//! HTTP clients.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use bxhttp::{Handler, Limits, RequestBody};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame};
use std::convert::Infallible;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot, watch};

/// The size of `/big`'s answer, in bytes: far more than a socket holds.
pub const BIG_BYTES: usize = 8 << 20;

/// The longest a test waits for something it expects.
pub const WAIT: Duration = Duration::from_secs(10);

pub type TestBody = BoxBody<Bytes, Infallible>;

/// Routes: `/fast`; `/peer` (who sent it); `/wait` (counts itself in `waiting`, answers once
/// `release` is true); `/work?ms=N` (works N ms); `POST /echo` (the body's length); `/big`
/// ([`BIG_BYTES`], says on `big_dropped` when hyper drops it); `/stream?gap_ms=N` ("one", N
/// ms, "two").
pub struct TestHandler {
    pub refuse: bool,
    pub waiting: watch::Sender<usize>,
    pub release: watch::Sender<bool>,
    pub big_dropped: mpsc::UnboundedSender<()>,
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<TestBody> {
    let mut response = Response::new(Full::new(Bytes::from(body.into())).boxed());
    *response.status_mut() = status;
    response
}

fn ms_param(request: &Request<RequestBody>) -> u64 {
    request
        .uri()
        .query()
        .and_then(|q| q.split_once('=').map(|(_, v)| v.parse().unwrap()))
        .unwrap_or(0)
}

/// The same handler serves a Unix socket and a TCP port.
impl<S: bxhttp::Stream> Handler<S> for TestHandler {
    type Body = TestBody;
    const NAMES: bxhttp::Names = bxhttp::Names::new("test", "test.socket_group", "test");

    async fn check_peer(&self, _stream: &S) -> Result<(), String> {
        if self.refuse {
            Err("every peer is refused here".into())
        } else {
            Ok(())
        }
    }

    fn handle(
        &self,
        request: Request<RequestBody>,
    ) -> impl Future<Output = Response<TestBody>> + Send + use<S> {
        let waiting = self.waiting.clone();
        let mut release = self.release.subscribe();
        let big_dropped = self.big_dropped.clone();
        async move {
            match request.uri().path() {
                "/fast" => text(StatusCode::OK, "ok"),
                // Who the request came from, as the connection's kind says it.
                "/peer" => {
                    let extensions = request.extensions();
                    let peer = match (
                        extensions.get::<std::net::SocketAddr>(),
                        extensions.get::<bxhttp::peer::PeerUser>(),
                    ) {
                        (Some(addr), _) => format!("tcp {}", addr.ip()),
                        (None, Some(user)) => format!("uid {}", user.uid),
                        (None, None) => "unknown".to_string(),
                    };
                    text(StatusCode::OK, peer)
                }
                // An empty 400 of the handler's own: hyper's automatic answers look the same.
                "/bad" => Response::builder()
                    .status(StatusCode::BAD_REQUEST)
                    .body(Full::new(Bytes::new()).boxed())
                    .unwrap(),
                "/wait" => {
                    waiting.send_modify(|n| *n += 1);
                    let _ = release.wait_for(|r| *r).await;
                    text(StatusCode::OK, "released")
                }
                "/work" => {
                    // The handler computing, as a tool call would: the behaviour under test.
                    tokio::time::sleep(Duration::from_millis(ms_param(&request))).await;
                    text(StatusCode::OK, "worked")
                }
                "/echo" => match request.into_body().collect().await {
                    Ok(body) => text(StatusCode::OK, body.to_bytes().len().to_string()),
                    Err(e) => text(StatusCode::BAD_REQUEST, e.to_string()),
                },
                "/big" => Response::new(
                    Big {
                        left: BIG_BYTES,
                        dropped: big_dropped,
                    }
                    .boxed(),
                ),
                "/stream" => Response::new(
                    Gap {
                        sent: 0,
                        gap: Box::pin(tokio::time::sleep(Duration::from_millis(ms_param(
                            &request,
                        )))),
                    }
                    .boxed(),
                ),
                _ => text(StatusCode::NOT_FOUND, "no such path"),
            }
        }
    }

    fn refused(&self, why: &str) -> Response<TestBody> {
        text(StatusCode::FORBIDDEN, format!("refused: {why}"))
    }

    fn overloaded(&self, why: &str) -> Response<TestBody> {
        text(StatusCode::SERVICE_UNAVAILABLE, format!("busy: {why}"))
    }

    fn malformed(&self, status: StatusCode, why: &str) -> Response<TestBody> {
        let mut response = text(status, format!("malformed {}: {why}", status.as_u16()));
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain"),
        );
        response
    }
}

/// [`BIG_BYTES`] in 64 KiB frames; says on `dropped` when dropped.
struct Big {
    left: usize,
    dropped: mpsc::UnboundedSender<()>,
}

impl Body for Big {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(64 << 10);
        self.left -= n;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![b'x'; n])))))
    }
}

impl Drop for Big {
    fn drop(&mut self) {
        let _ = self.dropped.send(());
    }
}

/// "one", then a gap, then "two": a stream waiting for its next event.
struct Gap {
    sent: u8,
    gap: Pin<Box<tokio::time::Sleep>>,
}

impl Body for Gap {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.sent {
            0 => {
                self.sent = 1;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"one")))))
            }
            1 => match self.gap.as_mut().poll(cx) {
                Poll::Pending => Poll::Pending,
                Poll::Ready(()) => {
                    self.sent = 2;
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"two")))))
                }
            },
            _ => Poll::Ready(None),
        }
    }
}

/// A served [`TestHandler`].
pub struct Served {
    pub socket: PathBuf,
    pub waiting: watch::Receiver<usize>,
    pub release: watch::Sender<bool>,
    pub big_dropped: mpsc::UnboundedReceiver<()>,
    stop: Option<oneshot::Sender<()>>,
    pub server: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

/// Generous limits a test narrows: nothing closes by itself within a test's time.
pub fn limits() -> Limits {
    Limits {
        max_connections: 64,
        header_read_timeout_ms: 60_000,
        idle_timeout_ms: 60_000,
        shutdown_drain_ms: 5_000,
    }
}

/// Serves a [`TestHandler`] with `limits` on a new socket.
pub fn serve(limits: Limits, refuse: bool) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("test.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let (waiting_tx, waiting) = watch::channel(0);
    let (release, _) = watch::channel(false);
    let (dropped_tx, big_dropped) = mpsc::unbounded_channel();
    let handler = Arc::new(TestHandler {
        refuse,
        waiting: waiting_tx,
        release: release.clone(),
        big_dropped: dropped_tx,
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(bxhttp::serve(
        "test",
        listener,
        handler,
        limits,
        async move {
            let _ = stopped.await;
        },
    ));
    Served {
        socket,
        waiting,
        release,
        big_dropped,
        stop: Some(stop),
        server,
        _dir: dir,
    }
}

impl Served {
    /// Waits (bounded) until `n` requests wait on `/wait`.
    pub async fn wait_for_waiting(&mut self, n: usize) {
        tokio::time::timeout(WAIT, self.waiting.wait_for(|w| *w >= n))
            .await
            .expect("the requests did not arrive")
            .unwrap();
    }

    /// Tells the server to stop.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// A raw connection.
    pub async fn connect(&self) -> UnixStream {
        UnixStream::connect(&self.socket).await.unwrap()
    }
}

/// Sends a GET of `path` on a new HTTP connection over `stream`; the status and body.
pub async fn get_on(stream: UnixStream, path: &str) -> (StatusCode, String) {
    let connection = bxhttp::client::Connection::handshake(stream).await.unwrap();
    let request = Request::get(path)
        .header("host", "test")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = tokio::time::timeout(WAIT, connection.send(request))
        .await
        .expect("no answer in time")
        .unwrap();
    let status = response.status();
    let body = tokio::time::timeout(WAIT, response.into_body().collect())
        .await
        .expect("no whole body in time")
        .unwrap()
        .to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// GETs `path` on new connections until one is served (a 503 answers the others), within
/// [`WAIT`]; the answer, and how many were answered 503 first.
pub async fn get_once_room(served: &Served, path: &str) -> ((StatusCode, String), usize) {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut refused = 0;
    loop {
        let answer = get_on(served.connect().await, path).await;
        if answer.0 != StatusCode::SERVICE_UNAVAILABLE {
            return (answer, refused);
        }
        refused += 1;
        assert!(
            tokio::time::Instant::now() < deadline,
            "still no room after {refused} tries: {answer:?}"
        );
        // Pacing of the retries, as a client honouring Retry-After would (shorter here).
        tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
    }
}

/// How long [`get_once_room`] waits between tries.
const RETRY_MS: u64 = 50;

/// Reads `stream` until the server closes it (bounded); everything read.
pub async fn read_to_close(stream: &mut UnixStream) -> Vec<u8> {
    let mut all = Vec::new();
    let read = tokio::time::timeout(WAIT, async {
        let mut chunk = [0u8; 64 << 10];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server did not close the connection");
    all
}

/// Writes `bytes` on `stream`.
pub async fn send_raw(stream: &mut UnixStream, bytes: &[u8]) {
    stream.write_all(bytes).await.unwrap();
}
