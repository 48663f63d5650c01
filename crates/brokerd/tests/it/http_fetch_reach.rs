//! Where `http_fetch` may connect: a granted name that resolves to loopback, IPv4-mapped IPv6
//! literals, ports outside the grant (closed and open alike), redirects to another port, and
//! the addresses a name resolved to (only those that passed are connected to). Every refusal
//! happens before any connection, and no error quotes what a server sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use brokerd::builtin::http_fetch::HttpFetch;
use brokerd::config::{Grant, HttpFetchSettings};
use brokerd::tool::{CallContext, Tool, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const CAP: usize = 1 << 16;
const TIMEOUT_MS: u64 = 10_000;

/// A raw HTTP server on `ip`: answers every request with `answer(path)` (status line,
/// headers and body) and records the path of every connection ("" when none was read).
struct Server {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    async fn start(ip: &str, port: u16, answer: fn(&str) -> String) -> Server {
        let listener = TcpListener::bind((ip, port)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).to_string();
                let path = head.split_whitespace().nth(1).unwrap_or("").to_string();
                log.lock().unwrap().push(path.clone());
                let _ = stream.write_all(answer(&path).as_bytes()).await;
            }
        });
        Server { addr, seen, task }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn redirect(location: &str) -> String {
    format!(
        "HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\n\
         connection: close\r\n\r\n"
    )
}

/// Answers "inside" to every request.
fn inside(_: &str) -> String {
    ok("inside")
}

fn grant(value: Value) -> Grant {
    let mut value = value;
    value["tool"] = json!("http_fetch");
    serde_json::from_value(value).unwrap()
}

/// `http_fetch` with `evil.test` and `mixed.test` resolved by `[http_fetch] resolve`.
fn tool() -> HttpFetch {
    let mut settings = HttpFetchSettings::default();
    let ips = |list: &[&str]| {
        list.iter()
            .map(|ip| ip.parse::<IpAddr>().unwrap())
            .collect()
    };
    settings
        .resolve
        .insert("evil.test".into(), ips(&["127.0.0.1"]));
    settings
        .resolve
        .insert("mixed.test".into(), ips(&["127.0.0.1", "127.0.0.2"]));
    HttpFetch::new().with_settings(&settings)
}

async fn fetch(grant: &Grant, url: &str) -> Result<ToolOutput, ToolError> {
    let ctx = CallContext {
        grant,
        result_cap_bytes: CAP,
        timeout_ms: TIMEOUT_MS,
        secrets: &brokerd::secrets::Secrets::default(),
        record: None,
    };
    tool().call(&json!({ "url": url }), ctx).await
}

fn refused(r: Result<ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::HostNotAllowed(m)) => m,
        other => panic!("expected HostNotAllowed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_granted_name_that_resolves_to_loopback_is_refused_unless_a_network_allows_it() {
    let internal = Server::start("127.0.0.1", 0, inside).await;
    let url = format!("http://evil.test:{}/admin", internal.port());
    let only_name = grant(json!({"hosts": ["evil.test"], "ports": [internal.port()]}));
    let m = refused(fetch(&only_name, &url).await);
    assert!(m.contains("127.0.0.1 is loopback"), "{m}");
    assert!(internal.seen().is_empty());
    // The owner can let it reach loopback; the grant's networks are never named.
    let with_net = grant(json!({
        "hosts": ["evil.test"],
        "ports": [internal.port()],
        "networks": ["127.0.0.0/8"],
    }));
    assert_eq!(fetch(&with_net, &url).await.unwrap().content, "inside");
    assert_eq!(internal.seen(), ["/admin"]);
    let other_net = grant(json!({
        "hosts": ["evil.test"],
        "ports": [internal.port()],
        "networks": ["10.0.0.0/8"],
    }));
    let m = refused(fetch(&other_net, &url).await);
    assert!(!m.contains("10.0.0.0"), "{m}");
}

#[tokio::test]
async fn ipv6_literals_that_carry_loopback_are_refused() {
    let internal = Server::start("127.0.0.1", 0, inside).await;
    let port = internal.port();
    let any = grant(json!({"hosts": ["*"], "ports": [port]}));
    for url in [
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://[::ffff:7f00:1]:{port}/"),
        format!("http://[::127.0.0.1]:{port}/"),
        format!("http://[64:ff9b::7f00:1]:{port}/"),
        format!("http://[::1]:{port}/"),
        format!("http://[::]:{port}/"),
        format!("http://0.0.0.0:{port}/"),
    ] {
        let m = refused(fetch(&any, &url).await);
        assert!(m.contains("resolves only to addresses"), "{url}: {m}");
    }
    assert!(internal.seen().is_empty());
    // With loopback granted, the mapped form connects, to the IPv4 address.
    let with_net = grant(json!({"hosts": ["*"], "ports": [port], "networks": ["127.0.0.0/8"]}));
    let url = format!("http://[::ffff:127.0.0.1]:{port}/v6");
    assert_eq!(fetch(&with_net, &url).await.unwrap().content, "inside");
    assert_eq!(internal.seen(), ["/v6"]);
}

#[tokio::test]
async fn closed_and_open_ports_are_refused_alike_before_any_connection() {
    let open = Server::start("127.0.0.1", 0, inside).await;
    let closed = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let same = |m: String, port: u16| m.replace(&port.to_string(), "PORT");
    let url = |port: u16| format!("http://127.0.0.1:{port}/");
    // Not on the grant's ports (80 and 443 by default).
    let default_ports = grant(json!({"hosts": ["127.0.0.1"], "networks": ["127.0.0.0/8"]}));
    let a = refused(fetch(&default_ports, &url(open.port())).await);
    let b = refused(fetch(&default_ports, &url(closed)).await);
    assert_eq!(same(a.clone(), open.port()), same(b, closed), "{a}");
    assert!(a.contains("port"), "{a}");
    // On the grant's ports, but loopback is not granted.
    let ports = grant(json!({"hosts": ["127.0.0.1"], "ports": [open.port(), closed]}));
    let a = refused(fetch(&ports, &url(open.port())).await);
    let b = refused(fetch(&ports, &url(closed)).await);
    assert_eq!(same(a.clone(), open.port()), same(b, closed), "{a}");
    assert!(open.seen().is_empty());
}

#[tokio::test]
async fn a_host_entry_with_a_port_allows_that_port_only() {
    let server = Server::start("127.0.0.1", 0, inside).await;
    let entry = grant(json!({
        "hosts": [format!("http://127.0.0.1:{}", server.port())],
        "networks": ["127.0.0.0/8"],
    }));
    let url = format!("http://127.0.0.1:{}/x", server.port());
    assert_eq!(fetch(&entry, &url).await.unwrap().content, "inside");
    let m = refused(fetch(&entry, "http://127.0.0.1/x").await);
    assert!(m.contains("port 80"), "{m}");
    assert_eq!(server.seen(), ["/x"]);
}

/// The allowed page: `/to-other` redirects to `evil.test` on the port in its query.
fn redirecting(path: &str) -> String {
    match path.strip_prefix("/to-other?port=") {
        Some(port) => redirect(&format!("http://evil.test:{port}/secret-path")),
        None => match path {
            "/bad-location" => redirect("http://bad host/SERVER-TEXT"),
            "/to-missing" => redirect("/SERVER-PATH-404"),
            "/SERVER-PATH-404" => missing(path),
            _ => ok("allowed"),
        },
    }
}

fn missing(_: &str) -> String {
    "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string()
}

#[tokio::test]
async fn a_redirect_to_the_granted_name_on_another_port_is_not_followed() {
    let allowed = Server::start("127.0.0.1", 0, redirecting).await;
    let other = Server::start("127.0.0.1", 0, inside).await;
    let url = format!(
        "http://evil.test:{}/to-other?port={}",
        allowed.port(),
        other.port()
    );
    let g = grant(json!({
        "hosts": ["evil.test"],
        "ports": [allowed.port()],
        "networks": ["127.0.0.0/8"],
    }));
    let m = refused(fetch(&g, &url).await);
    assert_eq!(m, "redirect to a port outside the grant");
    assert_eq!(allowed.seen().len(), 1);
    assert!(other.seen().is_empty());
    // Every hop is checked like the first: the other port allowed, loopback not.
    let no_net = grant(json!({"hosts": ["evil.test"], "ports": [allowed.port(), other.port()]}));
    let m = refused(fetch(&no_net, &url).await);
    assert!(m.contains("127.0.0.1 is loopback"), "{m}");
    let g = grant(json!({
        "hosts": ["evil.test"],
        "ports": [allowed.port(), other.port()],
        "networks": ["127.0.0.0/8"],
    }));
    assert_eq!(fetch(&g, &url).await.unwrap().content, "inside");
    assert_eq!(other.seen(), ["/secret-path"]);
}

#[tokio::test]
async fn errors_never_quote_what_the_server_sent() {
    let server = Server::start("127.0.0.1", 0, redirecting).await;
    let g = grant(
        json!({"hosts": ["127.0.0.1"], "ports": [server.port()], "networks": ["127.0.0.0/8"]}),
    );
    for (path, server_text) in [
        ("/bad-location", "SERVER-TEXT"),
        ("/to-missing", "SERVER-PATH-404"),
    ] {
        let url = format!("http://127.0.0.1:{}{path}", server.port());
        let m = match fetch(&g, &url).await {
            Err(ToolError::Failed(m)) => m,
            other => panic!("{path}: expected Failed, got {other:?}"),
        };
        assert!(!m.contains(server_text), "{m}");
        assert!(m.contains(&url), "names the model's own URL: {m}");
    }
}

#[tokio::test]
async fn only_the_addresses_that_passed_are_connected_to() {
    // mixed.test resolves to 127.0.0.1 first, then 127.0.0.2; only the second is granted.
    let refused_first = Server::start("127.0.0.1", 0, inside).await;
    let granted = Server::start("127.0.0.2", refused_first.port(), |_| ok("granted")).await;
    let g = grant(json!({
        "hosts": ["mixed.test"],
        "ports": [granted.port()],
        "networks": ["127.0.0.2/32"],
    }));
    let url = format!("http://mixed.test:{}/page", granted.port());
    assert_eq!(fetch(&g, &url).await.unwrap().content, "granted");
    assert_eq!(granted.seen(), ["/page"]);
    assert!(refused_first.seen().is_empty());
}
