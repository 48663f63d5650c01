//! A burst of clients far past the cap (issue 33.5): every client gets an HTTP answer, its own
//! or a 503 with `Retry-After`, never a reset or a close without one; a request's unread body
//! does not turn the 503 into a reset; and HTTP/1.0 on a Unix socket is answered 400.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{self, TestHandler, WAIT, limits, read_to_close, send_raw, serve};
use bxhttp::Limits;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::{mpsc, watch};

/// Clients in a burst: far more than the cap and than the answers past it that run at once.
const CLIENTS: usize = 400;
/// The cap in these tests.
const CAP: usize = 8;

fn cap() -> Limits {
    Limits {
        max_connections: CAP,
        ..limits()
    }
}

/// Writes `request` on `stream` and reads until the server closes; what came back, or why
/// nothing did (the write or a read failed: a reset).
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &[u8],
) -> Result<String, String> {
    stream
        .write_all(request)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut all = Vec::new();
    let read = tokio::time::timeout(WAIT, stream.read_to_end(&mut all)).await;
    let text = String::from_utf8_lossy(&all).into_owned();
    match read {
        Ok(Ok(_)) if text.starts_with("HTTP/1.") => Ok(text),
        Ok(Ok(_)) => Err(format!("closed with no answer: {text:?}")),
        Ok(Err(e)) => Err(format!("read: {e} after {text:?}")),
        Err(_) => Err("no answer in time".to_string()),
    }
}

/// The answers' statuses, each client's outcome checked: 200, or 503 with `Retry-After`.
fn tally(outcomes: Vec<Result<String, String>>) -> (usize, usize) {
    let (mut ok, mut busy) = (0, 0);
    for outcome in outcomes {
        let answer = outcome.unwrap_or_else(|why| panic!("a client got no answer: {why}"));
        if answer.starts_with("HTTP/1.1 200") {
            ok += 1;
        } else {
            assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
            assert!(answer.contains("retry-after: 1\r\n"), "{answer}");
            busy += 1;
        }
    }
    (ok, busy)
}

/// Each request keeps its connection busy a while, so the cap is reached and stays reached.
const WORK: &[u8] = b"GET /work?ms=50 HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_a_unix_socket_gets_answers_never_resets() {
    let served = serve(cap(), false);
    let socket = served.socket.clone();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let socket = socket.clone();
            tokio::spawn(async move {
                let stream = UnixStream::connect(&socket).await.unwrap();
                exchange(stream, WORK).await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for client in clients {
        outcomes.push(client.await.unwrap());
    }
    let (ok, busy) = tally(outcomes);
    assert!(ok >= CAP, "only {ok} served, {busy} refused");
    assert!(busy > 0, "the burst never went past the cap");
}

/// Serves a [`TestHandler`] on a loopback port.
async fn serve_tcp(limits: Limits) -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler = Arc::new(TestHandler {
        refuse: false,
        waiting: watch::channel(0).0,
        release: watch::channel(false).0,
        big_dropped: mpsc::unbounded_channel().0,
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bxhttp::serve(
        "test",
        listener,
        handler,
        limits,
        async move {
            let _ = stopped.await;
        },
    ));
    (addr, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_a_tcp_port_with_bodies_gets_answers_never_resets() {
    let (addr, _stop) = serve_tcp(cap()).await;
    // A body the 503 never reads: closing on it unread would reset the connection (on TCP
    // the reset can take the answer with it).
    let body = vec![b'x'; 64 << 10];
    let mut request = format!(
        "POST /echo HTTP/1.1\r\nhost: t\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let request = Arc::new(request);
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let request = Arc::clone(&request);
            tokio::spawn(async move {
                let stream = TcpStream::connect(addr).await.unwrap();
                exchange(stream, &request).await
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for client in clients {
        outcomes.push(client.await.unwrap());
    }
    let (ok, busy) = tally(outcomes);
    assert!(ok >= CAP, "only {ok} served, {busy} refused");
    assert!(busy > 0, "the burst never went past the cap");
}

#[tokio::test]
async fn with_every_connection_busy_the_503_says_when_to_retry() {
    let mut served = serve(
        Limits {
            max_connections: 1,
            ..limits()
        },
        false,
    );
    let busy = tokio::spawn(common::get_on(served.connect().await, "/wait"));
    served.wait_for_waiting(1).await;
    let mut refused = served.connect().await;
    send_raw(&mut refused, b"GET /fast HTTP/1.1\r\nhost: t\r\n\r\n").await;
    let answer = String::from_utf8(read_to_close(&mut refused).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1\r\n"), "{answer}");
    served.release.send_replace(true);
    assert_eq!(busy.await.unwrap().0, http::StatusCode::OK);
}

#[tokio::test]
async fn http_1_0_on_a_unix_socket_gets_the_handlers_400_and_on_tcp_is_served() {
    let served = serve(limits(), false);
    let mut stream = served.connect().await;
    send_raw(&mut stream, b"GET /fast HTTP/1.0\r\nhost: t\r\n\r\n").await;
    let answer = String::from_utf8(read_to_close(&mut stream).await).unwrap();
    // hyper answers in the request's version.
    assert!(answer.starts_with("HTTP/1.0 400 Bad Request"), "{answer}");
    assert!(
        answer.contains("malformed 400: the request is HTTP/1.0"),
        "{answer}"
    );
    // A scraper on TCP may speak HTTP/1.0 (the metrics listeners).
    let (addr, _stop) = serve_tcp(limits()).await;
    let stream = TcpStream::connect(addr).await.unwrap();
    let answer = exchange(stream, b"GET /fast HTTP/1.0\r\nhost: t\r\n\r\n")
        .await
        .unwrap();
    assert!(answer.ends_with("ok"), "{answer}");
}
