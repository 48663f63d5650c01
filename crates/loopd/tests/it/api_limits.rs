//! The API's connection limits (`[api] max_connections`, `header_read_timeout_ms`,
//! `idle_timeout_ms`): a client that never sends its request, or never sends all of its body,
//! cannot keep the socket from others; when every connection has a request in flight a new one
//! gets loopd's 503 error body; a request head hyper cannot read gets loopd's error body too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_common;

use api_common::{bounded, get, json, read_until, request, send, start, test_options};
use http::{Method, StatusCode};
use loopd::api::{ApiOptions, Limits};
use proto::api::{ApiError, error_kind};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

fn options(max_connections: usize, header_read_timeout_ms: u64) -> ApiOptions {
    let base = test_options();
    ApiOptions {
        connections: Limits {
            max_connections,
            header_read_timeout_ms,
            ..base.connections
        },
        ..base
    }
}

/// Waits (bounded) until loopd closes `stream`.
async fn closed(stream: &mut UnixStream) {
    let mut byte = [0u8; 1];
    let read = bounded(stream.read(&mut byte)).await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

#[tokio::test]
async fn api_half_open_connections_past_the_cap_do_not_keep_a_request_out() {
    let served = start(options(2, 60_000));
    let mut silent = Vec::new();
    for _ in 0..5 {
        silent.push(UnixStream::connect(&served.socket).await.unwrap());
    }
    // Just opened, they may be about to send: until their grace is over a newcomer is
    // answered 503 (bxhttp::FIRST_BYTE_GRACE_MS); then they are closed to make room.
    let started = Instant::now();
    loop {
        let (status, headers, _) = send(&served.socket, get("/v1/status")).await;
        if status == StatusCode::OK {
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(headers[http::header::RETRY_AFTER], "1");
        assert!(started.elapsed() < Duration::from_secs(10), "never served");
        // Pacing of the retries, as a client honouring Retry-After would (shorter here).
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // All but the one still in a place were closed (to make room, or unanswered past the
    // cap: they asked nothing), long before the header-read timeout.
    let mut open = 0;
    for stream in &mut silent {
        let mut byte = [0u8; 1];
        match tokio::time::timeout(Duration::from_secs(3), stream.read(&mut byte)).await {
            Ok(Ok(0) | Err(_)) => {}
            _ => open += 1,
        }
    }
    assert!(open <= 1, "{open} silent connections still open");
    served.stop().await;
}

#[tokio::test]
async fn api_a_client_that_never_sends_its_request_is_closed_at_the_header_read_timeout() {
    let served = start(options(64, 200));
    let mut silent = UnixStream::connect(&served.socket).await.unwrap();
    closed(&mut silent).await;
    served.stop().await;
}

#[tokio::test]
async fn api_when_every_connection_streams_a_new_one_gets_503_with_an_api_error() {
    let served = start(options(1, 60_000));
    let follow = request(Method::GET, "/v1/sessions/s1/events", &[], "");
    let (status, _, mut events) = send(&served.socket, follow).await;
    assert_eq!(status, StatusCode::OK);
    // The stream is open (its first ping came): its request is in flight.
    read_until(&mut events, |seen| seen.contains(": ping")).await;

    let (status, _, body) = send(&served.socket, get("/v1/status")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let error = json(body).await;
    assert_eq!(error["error"]["kind"], error_kind::UNAVAILABLE);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("api.max_connections"), "{message}");
    assert!(message.contains("request in flight"), "{message}");

    drop(events);
    served.stop().await;
}

/// Sends `head` on a new connection, reading while it is written (it may be larger than the
/// socket holds), until loopd closes; the status line and the error body.
async fn unreadable(socket: &std::path::Path, head: Vec<u8>) -> (String, ApiError) {
    let (mut reader, mut writer) = UnixStream::connect(socket).await.unwrap().into_split();
    let writing = tokio::spawn(async move {
        // loopd may close before all of a head too large is written.
        let _ = writer.write_all(&head).await;
        writer
    });
    let mut answer = Vec::new();
    bounded(reader.read_to_end(&mut answer)).await.unwrap();
    drop(writing);
    let answer = String::from_utf8(answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.contains("content-type: application/json"), "{answer}");
    let status = head.lines().next().unwrap().to_string();
    (status, serde_json::from_str(body).unwrap())
}

#[tokio::test]
async fn api_a_request_head_hyper_cannot_read_gets_an_api_error() {
    let served = start(test_options());
    let fields: String = (0..=bxhttp::MAX_HEADER_FIELDS)
        .map(|i| format!("x-{i}: v\r\n"))
        .collect();
    let cases = [
        (
            "GET /v1/status HTTP/1.1\r\nno colon\r\n\r\n".to_string(),
            400,
            error_kind::BAD_REQUEST,
            "not valid HTTP/1.1".to_string(),
        ),
        (
            format!(
                "GET /v1/{} HTTP/1.1\r\nhost: l\r\n\r\n",
                "a".repeat(bxhttp::MAX_URI_BYTES)
            ),
            414,
            error_kind::URI_TOO_LONG,
            format!("longer than {} bytes", bxhttp::MAX_URI_BYTES),
        ),
        (
            format!("GET /v1/status HTTP/1.1\r\nhost: l\r\n{fields}\r\n"),
            431,
            error_kind::HEAD_TOO_LARGE,
            format!("more than {} header fields", bxhttp::MAX_HEADER_FIELDS),
        ),
    ];
    for (head, code, kind, says) in cases {
        let (status, error) = unreadable(&served.socket, head.into_bytes()).await;
        assert!(status.starts_with(&format!("HTTP/1.1 {code} ")), "{status}");
        assert_eq!(error.error.code, code);
        assert_eq!(error.error.kind, kind);
        assert!(error.error.message.contains(&says), "{error:?}");
    }
    // Each closed only its own connection.
    let (status, _, _) = send(&served.socket, get("/v1/status")).await;
    assert_eq!(status, StatusCode::OK);
    served.stop().await;
}

#[tokio::test]
async fn api_an_http_1_0_request_gets_400_with_an_api_error() {
    let served = start(test_options());
    for method in ["GET", "POST"] {
        let head = format!("{method} /v1/status HTTP/1.0\r\nhost: l\r\n\r\n");
        let (status, error) = unreadable(&served.socket, head.into_bytes()).await;
        // hyper answers in the request's version.
        assert_eq!(status, "HTTP/1.0 400 Bad Request");
        assert_eq!(error.error.kind, error_kind::BAD_REQUEST);
        assert!(
            error.error.message.contains("HTTP/1.0") && error.error.message.contains("HTTP/1.1"),
            "{error:?}"
        );
    }
    served.stop().await;
}

#[tokio::test]
async fn api_a_request_body_never_sent_whole_is_closed_at_the_idle_timeout() {
    const IDLE_TIMEOUT_MS: u64 = 200;
    let base = test_options();
    let served = start(ApiOptions {
        connections: Limits {
            idle_timeout_ms: IDLE_TIMEOUT_MS,
            ..base.connections
        },
        ..base
    });
    let mut stream = UnixStream::connect(&served.socket).await.unwrap();
    let started = Instant::now();
    stream
        .write_all(
            b"POST /v1/tasks HTTP/1.1\r\nhost: l\r\ncontent-type: application/json\r\n\
              content-length: 100\r\n\r\n{\"session\":",
        )
        .await
        .unwrap();
    closed(&mut stream).await;
    assert!(started.elapsed() >= Duration::from_millis(IDLE_TIMEOUT_MS));
    assert!(served.stub.submitted.lock().unwrap().is_empty());
    served.stop().await;
}
