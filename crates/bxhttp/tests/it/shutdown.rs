//! The server at shutdown: the socket closes at once to new clients while the connections
//! already open finish within the drain time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::{WAIT, limits, read_to_close, send_raw, serve};
use std::time::{Duration, Instant};
use tokio::net::UnixStream;

/// How often the test tries to connect while it waits for the socket to close.
const RETRY_MS: u64 = 10;

#[tokio::test]
async fn at_shutdown_new_clients_are_refused_at_once_while_open_requests_finish() {
    let mut served = serve(limits(), false);
    let mut open = served.connect().await;
    send_raw(&mut open, b"GET /wait HTTP/1.1\r\nhost: t\r\n\r\n").await;
    served.wait_for_waiting(1).await;
    served.stop();
    // Well within the drain time, which the open request holds up in full.
    let refused_by = Instant::now() + Duration::from_millis(limits().shutdown_drain_ms / 2);
    while UnixStream::connect(&served.socket).await.is_ok() {
        assert!(
            Instant::now() < refused_by,
            "new clients still connect while the server drains"
        );
        tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
    }
    assert!(!served.socket.exists());
    served.release.send(true).unwrap();
    let answer = String::from_utf8(read_to_close(&mut open).await).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("released"), "{answer}");
    tokio::time::timeout(WAIT, &mut served.server)
        .await
        .expect("the server did not stop")
        .unwrap();
}
