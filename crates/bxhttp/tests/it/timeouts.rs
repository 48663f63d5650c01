//! `header_read_timeout_ms` and `idle_timeout_ms`: slow and stalled peers are closed, a
//! handler at work is not; and the drain at shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use bxhttp::Limits;
use common::{BIG_BYTES, WAIT, get_on, limits, read_to_close, send_raw, serve};
use http::StatusCode;
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// The short timeout these tests use, in milliseconds.
const SHORT_MS: u64 = 300;

fn header_timeout() -> Limits {
    Limits {
        header_read_timeout_ms: SHORT_MS,
        ..limits()
    }
}

fn idle_timeout() -> Limits {
    Limits {
        idle_timeout_ms: SHORT_MS,
        ..limits()
    }
}

#[tokio::test]
async fn a_slow_loris_is_closed_at_the_header_read_timeout() {
    let served = serve(header_timeout(), false);
    let stream = served.connect().await;
    let (mut reader, mut writer) = stream.into_split();
    let started = Instant::now();
    // Trickles a head that never ends, one byte a tick, until the server has closed.
    let trickle = tokio::spawn(async move {
        let mut sent = 0;
        if writer
            .write_all(b"GET /fast HTTP/1.1\r\nx-slow: ")
            .await
            .is_err()
        {
            return sent;
        }
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        while writer.write_all(b"a").await.is_ok() && sent < 10_000 {
            sent += 1;
            tick.tick().await;
        }
        sent
    });
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(WAIT, tokio::io::AsyncReadExt::read(&mut reader, &mut byte))
        .await
        .expect("the slow head was not cut");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() >= Duration::from_millis(SHORT_MS));
    let sent = tokio::time::timeout(WAIT, trickle).await.unwrap().unwrap();
    assert!(sent > 0, "the head was trickling when it was cut");
}

#[tokio::test]
async fn a_connection_that_never_sends_a_byte_is_closed_at_the_header_read_timeout() {
    let served = serve(header_timeout(), false);
    let mut stream = served.connect().await;
    let started = Instant::now();
    assert!(read_to_close(&mut stream).await.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(SHORT_MS));
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_at_the_header_read_timeout() {
    let served = serve(header_timeout(), false);
    let mut stream = served.connect().await;
    send_raw(&mut stream, b"GET /fast HTTP/1.1\r\nhost: t\r\n\r\n").await;
    let answer = String::from_utf8(read_to_close(&mut stream).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("ok"), "{answer}");
}

#[tokio::test]
async fn a_stalled_request_body_is_closed_at_the_idle_timeout() {
    let served = serve(idle_timeout(), false);
    let mut stream = served.connect().await;
    let started = Instant::now();
    send_raw(
        &mut stream,
        b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 100\r\n\r\nonly ten b",
    )
    .await;
    let answer = read_to_close(&mut stream).await;
    assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    assert!(started.elapsed() >= Duration::from_millis(SHORT_MS));
}

#[tokio::test]
async fn an_answer_the_peer_does_not_read_is_closed_at_the_idle_timeout() {
    let mut served = serve(idle_timeout(), false);
    let mut stream = served.connect().await;
    send_raw(&mut stream, b"GET /big HTTP/1.1\r\nhost: t\r\n\r\n").await;
    // Not reading: the server's writes stall until the idle timeout drops the answer.
    tokio::time::timeout(WAIT, served.big_dropped.recv())
        .await
        .expect("the unread answer was not dropped");
    let got = read_to_close(&mut stream).await;
    assert!(got.len() < BIG_BYTES, "the whole answer came through");
}

#[tokio::test]
async fn a_handler_at_work_is_not_cut_by_either_timeout() {
    let served = serve(
        Limits {
            header_read_timeout_ms: SHORT_MS,
            idle_timeout_ms: SHORT_MS,
            ..limits()
        },
        false,
    );
    let work = format!("/work?ms={}", 4 * SHORT_MS);
    let (status, body) = get_on(served.connect().await, &work).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "worked"));
    // A stream whose next event takes longer than the timeouts.
    let stream = format!("/stream?gap_ms={}", 4 * SHORT_MS);
    let (status, body) = get_on(served.connect().await, &stream).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "onetwo"));
}

#[tokio::test]
async fn a_large_answer_read_at_once_is_not_cut() {
    let served = serve(idle_timeout(), false);
    let (status, body) = get_on(served.connect().await, "/big").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body.len(), BIG_BYTES);
}

#[tokio::test]
async fn shutdown_finishes_requests_in_flight_then_removes_the_socket() {
    let mut served = serve(limits(), false);
    let work = tokio::spawn(get_on(served.connect().await, "/work?ms=300"));
    // Until the request has arrived, a stop could race its connection.
    let (status, _) = get_on(served.connect().await, "/fast").await;
    assert_eq!(status, StatusCode::OK);
    served.stop();
    assert_eq!(work.await.unwrap().0, StatusCode::OK);
    tokio::time::timeout(WAIT, &mut served.server)
        .await
        .expect("the server did not stop")
        .unwrap();
    assert!(!served.socket.exists());
}

#[tokio::test]
async fn shutdown_cuts_what_is_still_open_after_the_drain_time() {
    let mut served = serve(
        Limits {
            shutdown_drain_ms: SHORT_MS,
            ..limits()
        },
        false,
    );
    let mut stuck = served.connect().await;
    send_raw(&mut stuck, b"GET /wait HTTP/1.1\r\nhost: t\r\n\r\n").await;
    served.wait_for_waiting(1).await;
    served.stop();
    tokio::time::timeout(WAIT, &mut served.server)
        .await
        .expect("the server did not stop")
        .unwrap();
    assert!(read_to_close(&mut stuck).await.is_empty());
}
