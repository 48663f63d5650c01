use super::*;
use crate::exposition::{CLASSIC_CONTENT_TYPE, OPENMETRICS_CONTENT_TYPE};
use std::fmt;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Fixed;

impl Source for Fixed {
    fn open_metrics(&self) -> Result<String, fmt::Error> {
        Ok("# HELP t Turns.\n# TYPE t counter\nt_total 2\n# EOF\n".to_string())
    }
}

async fn get(addr: SocketAddr, head: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn the_listener_serves_metrics_in_the_asked_format_and_nothing_else() {
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve_tcp(
        "test",
        listener,
        Arc::new(Fixed),
        Vec::new(),
        async {
            let _ = stopped.await;
        },
    ));

    let plain = get(
        addr,
        &format!("GET /metrics HTTP/1.1\r\nhost: {addr}\r\n\r\n"),
    )
    .await;
    assert!(plain.starts_with("HTTP/1.1 200"), "{plain}");
    assert!(plain.contains(CLASSIC_CONTENT_TYPE), "{plain}");
    assert!(plain.contains("# TYPE t_total counter"), "{plain}");

    let open = get(
        addr,
        &format!(
            "GET /metrics HTTP/1.1\r\nhost: {addr}\r\naccept: application/openmetrics-text\r\n\r\n"
        ),
    )
    .await;
    assert!(open.contains(OPENMETRICS_CONTENT_TYPE), "{open}");
    assert!(open.contains("# EOF"), "{open}");

    let other = get(
        addr,
        &format!("GET /v1/status HTTP/1.1\r\nhost: {addr}\r\n\r\n"),
    )
    .await;
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    let post = get(
        addr,
        &format!("POST /metrics HTTP/1.1\r\nhost: {addr}\r\ncontent-length: 0\r\n\r\n"),
    )
    .await;
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");

    stop.send(()).unwrap();
    server.await.unwrap();
}

/// The longest a test waits for something it expects.
const WAIT: Duration = Duration::from_secs(10);

/// A listener on a free loopback port serving [`Fixed`]; its address and its stop.
async fn start() -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve_tcp(
        "test",
        listener,
        Arc::new(Fixed),
        Vec::new(),
        async {
            let _ = stopped.await;
        },
    ));
    (addr, stop)
}

#[tokio::test]
async fn idle_and_half_open_connections_past_the_cap_do_not_stop_a_scrape() {
    let (addr, stop) = start().await;
    // Half send nothing, half stop in the middle of a request head.
    let mut held = Vec::new();
    for i in 0..MAX_CONNECTIONS + 4 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        if i % 2 == 1 {
            stream
                .write_all(b"GET /metrics HTTP/1.1\r\nhost: ")
                .await
                .unwrap();
        }
        held.push(stream);
    }
    let head = format!("GET /metrics HTTP/1.1\r\nhost: {addr}\r\n\r\n");
    let scraped = tokio::time::timeout(WAIT, get(addr, &head))
        .await
        .expect("the scrape was not answered");
    assert!(scraped.starts_with("HTTP/1.1 200"), "{scraped:?}");
    drop(held);
    let _ = stop.send(());
}

#[tokio::test]
async fn a_request_for_another_host_is_refused_and_the_listeners_own_names_are_served() {
    let (addr, stop) = start().await;
    let port = addr.port();
    for host in [addr.to_string(), format!("localhost:{port}")] {
        let ok = get(
            addr,
            &format!("GET /metrics HTTP/1.1\r\nhost: {host}\r\n\r\n"),
        )
        .await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{host}: {ok}");
    }
    // A page of another site whose name was made to point at 127.0.0.1 (DNS rebinding).
    let rebound = get(
        addr,
        &format!("GET /metrics HTTP/1.1\r\nhost: evil.example:{port}\r\n\r\n"),
    )
    .await;
    assert!(rebound.starts_with("HTTP/1.1 421"), "{rebound}");
    assert!(rebound.contains("evil.example"), "{rebound}");
    assert!(!rebound.contains("t_total"), "{rebound}");
    let missing = get(addr, "GET /metrics HTTP/1.0\r\n\r\n").await;
    assert!(missing.starts_with("HTTP/1.0 400"), "{missing}");
    assert!(missing.contains("Host"), "{missing}");
    let _ = stop.send(());
}
