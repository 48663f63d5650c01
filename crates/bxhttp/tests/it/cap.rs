//! `max_connections`: at the cap the oldest connection that is neither busy nor new is closed
//! to make room (a silent one once its grace is over, a head arriving slowly, idle keep-alive,
//! a request whose peer stalls), a busy or new one never is, and when none may be closed a
//! new one gets 503.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use bxhttp::{FIRST_BYTE_GRACE_MS, Limits};
use common::{get_on, get_once_room, limits, read_to_close, send_raw, serve};
use http::StatusCode;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

fn cap(max_connections: usize) -> Limits {
    Limits {
        max_connections,
        ..limits()
    }
}

#[tokio::test]
async fn at_the_cap_a_silent_connection_is_kept_through_its_grace_then_closed() {
    let served = serve(cap(2), false);
    let opened = Instant::now();
    let mut oldest = served.connect().await;
    let second = served.connect().await;

    // Both just opened: their requests may be on their way, so the newcomer is refused.
    let (status, body) = get_on(served.connect().await, "/fast").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let ((status, body), _) = get_once_room(&served, "/fast").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
    assert!(opened.elapsed() >= Duration::from_millis(FIRST_BYTE_GRACE_MS));
    // The oldest was closed long before any timeout, the second still serves.
    assert!(read_to_close(&mut oldest).await.is_empty());
    let (status, _) = get_on(second, "/fast").await;
    assert_eq!(status, StatusCode::OK);
}

/// Reads one answer to `/fast` ("ok") off `stream`, leaving the connection open.
async fn read_fast_answer(stream: &mut tokio::net::UnixStream) {
    let mut all = Vec::new();
    let mut chunk = [0u8; 1024];
    while !all.ends_with(b"\r\n\r\nok") {
        let n = tokio::time::timeout(common::WAIT, stream.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&all));
        all.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn at_the_cap_a_busy_connection_is_kept_and_an_idle_keep_alive_one_closed() {
    let mut served = serve(cap(2), false);
    let busy = tokio::spawn(get_on(served.connect().await, "/wait"));
    served.wait_for_waiting(1).await;
    let mut idle = served.connect().await;
    send_raw(&mut idle, b"GET /fast HTTP/1.1\r\nhost: t\r\n\r\n").await;
    read_fast_answer(&mut idle).await;

    let (status, _) = get_on(served.connect().await, "/fast").await;
    assert_eq!(status, StatusCode::OK);
    assert!(read_to_close(&mut idle).await.is_empty());
    served.release.send_replace(true);
    let (status, body) = busy.await.unwrap();
    assert_eq!((status, body.as_str()), (StatusCode::OK, "released"));
}

#[tokio::test]
async fn silent_connections_past_the_cap_push_no_one_out_and_are_closed_unanswered() {
    let mut served = serve(cap(2), false);
    let busy = tokio::spawn(get_on(served.connect().await, "/wait"));
    served.wait_for_waiting(1).await;
    let mut idle = served.connect().await;
    send_raw(&mut idle, b"GET /fast HTTP/1.1\r\nhost: t\r\n\r\n").await;
    read_fast_answer(&mut idle).await;

    // A flood that sends nothing: it waits for its requests, it does not close the idle
    // keep-alive connection to make room.
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(served.connect().await);
    }
    for stream in &mut silent {
        assert!(read_to_close(stream).await.is_empty());
    }
    send_raw(&mut idle, b"GET /fast HTTP/1.1\r\nhost: t\r\n\r\n").await;
    read_fast_answer(&mut idle).await;
    // A client whose request is here does make room.
    let (status, _) = get_on(served.connect().await, "/fast").await;
    assert_eq!(status, StatusCode::OK);
    assert!(read_to_close(&mut idle).await.is_empty());
    served.release.send_replace(true);
    assert_eq!(busy.await.unwrap().0, StatusCode::OK);
}

#[tokio::test]
async fn at_the_cap_a_head_arriving_slowly_is_closed_at_once() {
    let served = serve(cap(1), false);
    let mut slow = served.connect().await;
    send_raw(&mut slow, b"GET /fast HTTP/1.1\r\nhost: t").await;
    let (status, body) = get_once_room(&served, "/fast").await.0;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
    assert!(read_to_close(&mut slow).await.is_empty());
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

    // Once the stalled peer has been quiet a while (bxhttp::SLOW_PEER_QUIET_MS), it goes.
    let (status, _) = get_once_room(&served, "/fast").await.0;
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
async fn a_flood_of_silent_connections_far_past_the_cap_leaves_the_server_serving() {
    const FLOOD: usize = 200;
    let served = serve(cap(4), false);
    let mut flood = Vec::new();
    for _ in 0..FLOOD {
        flood.push(served.connect().await);
    }
    let ((status, _), _) = get_once_room(&served, "/fast").await;
    assert_eq!(status, StatusCode::OK);
    // All but the few left in the cap's places were closed, without an answer (they asked
    // nothing), long before the header-read timeout.
    let (closed_tx, mut closed_rx) = tokio::sync::mpsc::unbounded_channel();
    for mut stream in flood {
        let closed_tx = closed_tx.clone();
        tokio::spawn(async move {
            let mut byte = [0u8; 1];
            if let Ok(Ok(0)) = tokio::time::timeout(common::WAIT, stream.read(&mut byte)).await {
                let _ = closed_tx.send(());
            }
        });
    }
    drop(closed_tx);
    let mut closed = 0;
    while closed < FLOOD - 4 && closed_rx.recv().await.is_some() {
        closed += 1;
    }
    assert_eq!(closed, FLOOD - 4);
}

#[tokio::test]
async fn a_refused_peer_gets_the_handlers_403() {
    let served = serve(limits(), true);
    let (status, body) = get_on(served.connect().await, "/fast").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body, "refused: every peer is refused here");
}
