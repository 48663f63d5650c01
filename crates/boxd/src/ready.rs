//! Readiness checks: an HTTP URL answering 200, or a Unix socket accepting a connection.

use crate::config::Ready;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// How often readiness is checked while a child starts, in milliseconds.
pub const POLL_MS: u64 = 50;
/// The longest one check may take, in milliseconds.
pub const CHECK_TIMEOUT_MS: u64 = 1_000;
/// The most bytes of an HTTP answer read to find its status line.
pub const STATUS_LINE_MAX_BYTES: usize = 1_024;

/// Waits, without end, until `ready` says ready (the caller bounds the wait).
pub async fn wait(ready: &Ready) {
    loop {
        let check = tokio::time::timeout(Duration::from_millis(CHECK_TIMEOUT_MS), check(ready));
        if matches!(check.await, Ok(true)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
}

/// One check: whether `ready` says ready now.
pub async fn check(ready: &Ready) -> bool {
    match ready {
        Ready::Socket(path) => UnixStream::connect(path).await.is_ok(),
        Ready::Http(url) => http_ok(url).await,
    }
}

/// Splits `http://host[:port][/path]` into (the address to connect to, `host:port`, with
/// port 80 when none is given; the `Host` header: the URL's authority; the path).
fn split_url(url: &str) -> Option<(String, &str, &str)> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Some((addr, authority, path))
}

/// Whether a GET of `url` answers 200.
async fn http_ok(url: &str) -> bool {
    let Some((addr, host, path)) = split_url(url) else {
        return false;
    };
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return false;
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut buf = Vec::with_capacity(STATUS_LINE_MAX_BYTES);
    let mut chunk = [0u8; 256];
    while !buf.contains(&b'\n') && buf.len() < STATUS_LINE_MAX_BYTES {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let line = String::from_utf8_lossy(&buf);
    let mut parts = line.split_whitespace();
    matches!(
        (parts.next(), parts.next()),
        (Some(v), Some("200")) if v.starts_with("HTTP/1.")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use tokio::net::TcpListener;

    #[test]
    fn urls_split_into_address_host_and_path() {
        let (a, h, p) = split_url("http://127.0.0.1:8080/health").unwrap();
        assert_eq!(
            (a.as_str(), h, p),
            ("127.0.0.1:8080", "127.0.0.1:8080", "/health")
        );
        let (a, _, p) = split_url("http://localhost").unwrap();
        assert_eq!((a.as_str(), p), ("localhost:80", "/"));
        assert!(split_url("https://x/").is_none());
    }

    async fn serve_once(status: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/health", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 512];
            let _ = s.read(&mut buf).await;
            let answer = format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n");
            s.write_all(answer.as_bytes()).await.unwrap();
        });
        url
    }

    #[tokio::test]
    async fn http_200_is_ready_and_503_is_not() {
        let url = serve_once("200 OK").await;
        assert!(check(&Ready::Http(url)).await);
        let url = serve_once("503 Service Unavailable").await;
        assert!(!check(&Ready::Http(url)).await);
    }

    #[tokio::test]
    async fn a_socket_is_ready_once_it_accepts() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        assert!(!check(&Ready::Socket(path.clone())).await);
        let _listener = tokio::net::UnixListener::bind(&path).unwrap();
        assert!(check(&Ready::Socket(path)).await);
    }
}
