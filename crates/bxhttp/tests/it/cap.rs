//! `max_connections`: at the cap the oldest connection that is not busy is closed to make
//! room, a busy one never is, and when every connection is busy a new one gets 503.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use bxhttp::Limits;
use common::{get_on, limits, read_to_close, send_raw, serve};
use http::StatusCode;

fn cap(max_connections: usize) -> Limits {
    Limits {
        max_connections,
        ..limits()
    }
}

#[tokio::test]
async fn at_the_cap_the_oldest_half_open_connection_is_closed() {
    let served = serve(cap(2), false);
    let mut oldest = served.connect().await;
    let second = served.connect().await;

    let (status, body) = get_on(served.connect().await, "/fast").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
    // The oldest was closed long before any timeout, the second still serves.
    assert!(read_to_close(&mut oldest).await.is_empty());
    let (status, _) = get_on(second, "/fast").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn at_the_cap_a_busy_connection_is_kept_and_a_younger_idle_one_closed() {
    let mut served = serve(cap(2), false);
    let busy = tokio::spawn(get_on(served.connect().await, "/wait"));
    served.wait_for_waiting(1).await;
    let mut idle = served.connect().await;

    let (status, _) = get_on(served.connect().await, "/fast").await;
    assert_eq!(status, StatusCode::OK);
    assert!(read_to_close(&mut idle).await.is_empty());
    served.release.send_replace(true);
    let (status, body) = busy.await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, "released"));
}

#[tokio::test]
async fn at_the_cap_a_request_waiting_on_its_peer_goes_before_a_busy_one() {
    let mut served = serve(cap(2), false);
    // Older: a body that stops half way; younger: busy.
    let mut stalled = served.connect().await;
    send_raw(
        &mut stalled,
        b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 100\r\n\r\nonly ten b",
    )
    .await;
    let busy = tokio::spawn(get_on(served.connect().await, "/wait"));
    served.wait_for_waiting(1).await;

    let (status, _) = get_on(served.connect().await, "/fast").await;
    assert_eq!(status, StatusCode::OK);
    assert!(read_to_close(&mut stalled).await.is_empty());
    served.release.send_replace(true);
    assert_eq!(busy.await.unwrap().0, StatusCode::OK);
}

#[tokio::test]
async fn at_the_cap_with_every_request_in_flight_a_new_connection_gets_503_and_is_closed() {
    let mut served = serve(cap(2), false);
    let first = tokio::spawn(get_on(served.connect().await, "/wait"));
    let second = tokio::spawn(get_on(served.connect().await, "/wait"));
    served.wait_for_waiting(2).await;

    let mut third = served.connect().await;
    send_raw(&mut third, b"GET /fast HTTP/1.1\r\nhost: t\r\n\r\n").await;
    let answer = String::from_utf8(read_to_close(&mut third).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("busy: all 2 connections have a request in flight"),
        "{answer}"
    );

    served.release.send_replace(true);
    assert_eq!(first.await.unwrap().0, StatusCode::OK);
    assert_eq!(second.await.unwrap().0, StatusCode::OK);
    // Room again: a new connection is served.
    assert_eq!(
        get_on(served.connect().await, "/fast").await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_flood_far_past_the_cap_leaves_the_server_serving() {
    let served = serve(cap(4), false);
    let mut flood = Vec::new();
    for _ in 0..200 {
        flood.push(served.connect().await);
    }
    let (status, _) = get_on(served.connect().await, "/fast").await;
    assert_eq!(status, StatusCode::OK);
    // All but the youngest few of the flood were closed.
    let mut closed = 0;
    for stream in flood.iter_mut().take(190) {
        if read_to_close(stream).await.is_empty() {
            closed += 1;
        }
    }
    assert_eq!(closed, 190);
}

#[tokio::test]
async fn a_refused_peer_gets_the_handlers_403() {
    let served = serve(limits(), true);
    let (status, body) = get_on(served.connect().await, "/fast").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body, "refused: every peer is refused here");
}
