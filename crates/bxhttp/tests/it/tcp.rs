//! The same accept loop on a TCP port (issue 32): at the cap a connection with no request is
//! closed to make room (a silent one once its grace is over), a head hyper cannot read gets
//! the handler's answer, and each request carries its peer's address.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{self, TestHandler, WAIT, limits};
use bxhttp::Limits;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

/// Serves a [`TestHandler`] with `limits` on a free loopback port; its address, and the
/// sender that stops it (dropped: stops).
async fn serve_tcp(limits: Limits) -> (SocketAddr, oneshot::Sender<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handler = Arc::new(TestHandler {
        refuse: false,
        waiting: watch::channel(0).0,
        release: watch::channel(false).0,
        big_dropped: mpsc::unbounded_channel().0,
    });
    let (stop, stopped) = oneshot::channel::<()>();
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

/// Reads `stream` until the server closes it (bounded); everything read, as text.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut all = Vec::new();
    let read = tokio::time::timeout(WAIT, async {
        let mut chunk = [0u8; 4096];
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server did not close the connection");
    String::from_utf8_lossy(&all).into_owned()
}

/// Sends `head` on a new connection; the whole answer.
async fn send(addr: SocketAddr, head: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    read_to_close(&mut stream).await
}

#[tokio::test]
async fn at_the_cap_a_slow_head_then_a_silent_tcp_connection_make_room() {
    let (addr, _stop) = serve_tcp(Limits {
        max_connections: 2,
        ..limits()
    })
    .await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let mut half = TcpStream::connect(addr).await.unwrap();
    half.write_all(b"GET /fast HTTP/1.1\r\nhost: t")
        .await
        .unwrap();
    let request = "GET /fast HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n";

    // The head arriving slowly goes first: the silent one may still be about to send.
    let answer = until_served(addr, request).await;
    assert!(answer.ends_with("ok"), "{answer}");
    assert_eq!(read_to_close(&mut half).await, "");
    // At the cap again, the silent one goes once its grace is over.
    let _younger = TcpStream::connect(addr).await.unwrap();
    let again = until_served(addr, request).await;
    assert!(again.ends_with("ok"), "{again}");
    assert_eq!(read_to_close(&mut silent).await, "");
}

/// Sends `head` on new connections until one is not answered 503 (bounded); that answer.
async fn until_served(addr: SocketAddr, head: &str) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let answer = send(addr, head).await;
        if !answer.starts_with("HTTP/1.1 503") {
            return answer;
        }
        assert!(tokio::time::Instant::now() < deadline, "never served");
        // Pacing of the retries, as a client honouring Retry-After would (shorter here).
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_head_hyper_cannot_read_over_tcp_gets_the_handlers_answer() {
    let (addr, _stop) = serve_tcp(limits()).await;
    let answer = send(addr, "GET /fast HTTP/1.1\r\nno colon here\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request"), "{answer}");
    assert!(
        answer.contains("malformed 400: the request is not valid HTTP/1.1"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_tcp_request_carries_its_peers_address() {
    let (addr, _stop) = serve_tcp(limits()).await;
    let answer = send(
        addr,
        "GET /peer HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(answer.ends_with("tcp 127.0.0.1"), "{answer}");
    // On the Unix socket, the peer's user.
    let served = common::serve(limits(), false);
    let (status, body) = common::get_on(served.connect().await, "/peer").await;
    assert_eq!(status, http::StatusCode::OK);
    assert!(body.starts_with("uid "), "{body}");
}
