//! The API's connection limits (`[api] max_connections`, `header_read_timeout_ms`): a client
//! that never sends its request cannot keep the socket from others, and when every connection
//! has a request in flight a new one gets loopd's 503 error body.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api_common;

use api_common::{bounded, get, json, read_until, request, send, start, test_options};
use http::{Method, StatusCode};
use loopd::api::{ApiOptions, Limits};
use proto::api::error_kind;
use tokio::io::AsyncReadExt;
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
    let (status, _, _) = send(&served.socket, get("/v1/status")).await;
    assert_eq!(status, StatusCode::OK);
    // Closed to make room, long before the header-read timeout.
    for stream in &mut silent[..4] {
        closed(stream).await;
    }
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
