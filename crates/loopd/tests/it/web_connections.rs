//! The console's connections (issue 32): idle and half-open connections past the cap do not
//! stop a browser's request, and a request naming another host is refused however it names
//! it.

use crate::api_common::bounded;
use crate::web_common::start_web;
use http::StatusCode;
use loopd::config::Web;
use loopd::web::MAX_WEB_CONNECTIONS;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connections that hold a slot without a request the server could answer: half send
/// nothing, half stop in the middle of a request head.
async fn hold(addr: std::net::SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for i in 0..count {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        if i % 2 == 1 {
            stream.write_all(b"GET / HTTP/1.1\r\nhost: ").await.unwrap();
        }
        held.push(stream);
    }
    held
}

#[tokio::test]
async fn idle_and_half_open_connections_past_the_cap_do_not_stop_a_browser() {
    let web = start_web(Web::default()).await;
    let browser = web.sign_in().await;
    let held = hold(web.addr, MAX_WEB_CONNECTIONS + 6).await;

    // Every request a browser makes still gets its answer (bounded by `send`).
    let page = web.get("/", &[("cookie", &browser.cookie)]).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    let asset = web.get("/static/console.css", &[]).await;
    assert_eq!(asset.status, StatusCode::OK);
    drop(held);
    web.stop().await;
}

/// Sends `head` on a new connection and reads the answer's head (bounded).
async fn raw(addr: std::net::SocketAddr, head: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0; 4096];
    let n = bounded(stream.read(&mut answer)).await.unwrap();
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

#[tokio::test]
async fn a_request_naming_another_host_twice_or_in_its_target_is_refused() {
    let web = start_web(Web::default()).await;
    let addr = web.addr;
    let ok = raw(
        addr,
        &format!("GET /static/console.css HTTP/1.1\r\nhost: {addr}\r\n\r\n"),
    )
    .await;
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    // Two Host fields: which one a proxy in front read is anyone's guess.
    let twice = raw(
        addr,
        &format!("GET /static/console.css HTTP/1.1\r\nhost: {addr}\r\nhost: evil.example\r\n\r\n"),
    )
    .await;
    assert!(twice.starts_with("HTTP/1.1 421"), "{twice}");
    // An absolute-form target names the host the request is for (RFC 9112, 3.2.2).
    let target = raw(
        addr,
        &format!("GET http://evil.example/static/console.css HTTP/1.1\r\nhost: {addr}\r\n\r\n"),
    )
    .await;
    assert!(target.starts_with("HTTP/1.1 421"), "{target}");
    let missing = raw(addr, "GET /static/console.css HTTP/1.0\r\n\r\n").await;
    assert!(missing.starts_with("HTTP/1.0 421"), "{missing}");
    web.stop().await;
}

#[tokio::test]
async fn an_origin_with_its_default_port_written_out_is_the_browsers_host_and_origin() {
    let web = start_web(Web {
        origin: Some("https://box.example.com:443".into()),
        ..Web::default()
    })
    .await;
    // A browser leaves the default port out of `Host`, `Origin` and the address bar.
    assert_eq!(web.console.origin.as_url(), "https://box.example.com");
    let link = web.console.sign_ins.mint_link().unwrap();
    let path = format!("/signin?token={}", link.token);
    let answer = web.get(&path, &[("host", "box.example.com")]).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    web.stop().await;
}
