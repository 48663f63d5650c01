//! Readiness checks: an HTTP URL answering 200, or a Unix socket accepting a connection, and in
//! both cases served by the child boxd started (or one of its descendants), not by whatever
//! else holds the address (a leftover of an earlier boxd, another program).
//!
//! A Unix socket's listener is named by the kernel: `SO_PEERCRED` of a connection to it gives
//! the pid that listens. A TCP listener is found in `/proc/self/net/tcp{,6}` (the listening
//! sockets that take connections to the address) and matched against the sockets that the
//! child and its descendants hold (`/proc/<pid>/fd`). When `/proc` does not tell (unreadable,
//! or no listening socket found), the 200 is taken as the child's, with a warning: that only
//! happens where `/proc` is restricted beyond what boxd's own unit does.
//!
//! A child that serves nothing boxd could check (chatd) is ready once it has run a given time
//! without exiting (`running_ms`).

use crate::config::Ready;
use crate::procs::{self, TcpOwner};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};

/// The longest wait between two readiness checks while a child starts, in milliseconds.
pub const POLL_MS: u64 = 50;
/// The first wait between checks, in milliseconds, doubled after each check up to
/// [`POLL_MS`] ([`poll_delay`]): brokerd and loopd bind their sockets within a few ms of their
/// start, and a fixed 50 ms poll added half that to every start on average (issue 36).
pub const FIRST_POLL_MS: u64 = 1;
/// The longest one check may take, in milliseconds.
pub const CHECK_TIMEOUT_MS: u64 = 1_000;
/// The most bytes of an HTTP answer read to find its status line.
pub const STATUS_LINE_MAX_BYTES: usize = 1_024;

/// What one check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// The child is ready.
    Ready,
    /// It is not (yet): why, in words.
    NotYet(String),
}

/// The wait after check number `n` (from 0): [`FIRST_POLL_MS`] doubled `n` times, at most
/// [`POLL_MS`].
pub fn poll_delay(n: u32) -> Duration {
    let ms = FIRST_POLL_MS.saturating_mul(2u64.saturating_pow(n));
    Duration::from_millis(ms.min(POLL_MS))
}

/// Waits, without end, until `ready` says the child `pid` is ready (the caller bounds the
/// wait). `last` holds what the latest check found, for the caller's error.
pub async fn wait(ready: &Ready, pid: u32, last: &mut String) {
    if let Ready::Running(ms) = ready {
        // The caller races the child's exit against this wait: still running when it ends is
        // ready.
        *last = format!("it had not run {ms} ms yet");
        tokio::time::sleep(Duration::from_millis(*ms)).await;
        return;
    }
    let mut checks = 0u32;
    loop {
        let check =
            tokio::time::timeout(Duration::from_millis(CHECK_TIMEOUT_MS), check(ready, pid));
        match check.await {
            Ok(Check::Ready) => return,
            Ok(Check::NotYet(why)) => *last = why,
            Err(_) => *last = format!("a check took longer than {CHECK_TIMEOUT_MS} ms"),
        }
        tokio::time::sleep(poll_delay(checks)).await;
        checks = checks.saturating_add(1);
    }
}

/// One check: whether `ready` says the child `pid` is ready now.
pub async fn check(ready: &Ready, pid: u32) -> Check {
    let Ok(pid) = i32::try_from(pid) else {
        return Check::NotYet(format!("pid {pid} is out of range"));
    };
    match ready {
        Ready::Socket(path) => {
            let stream = match UnixStream::connect(path).await {
                Ok(stream) => stream,
                Err(e) => return Check::NotYet(format!("{}: {e}", path.display())),
            };
            match stream.peer_cred().map(|c| c.pid()) {
                Ok(Some(listener)) if procs::descends_from(listener, pid) => Check::Ready,
                // pid 0: a process outside boxd's pid namespace.
                Ok(Some(listener)) => Check::NotYet(format!(
                    "{} is served by pid {listener}, not by the child (pid {pid}) or one of its \
                     descendants",
                    path.display()
                )),
                Ok(None) => Check::NotYet(format!(
                    "the kernel gives no pid for the process serving {}",
                    path.display()
                )),
                Err(e) => Check::NotYet(format!(
                    "cannot tell who serves {} (SO_PEERCRED): {e}",
                    path.display()
                )),
            }
        }
        Ready::Http(url) => http_ok(url, pid).await,
        // Time, not a check: `wait` counts it.
        Ready::Running(_) => Check::Ready,
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

/// Whether a GET of `url` answers 200 from a server the child `pid` (or a descendant) holds.
async fn http_ok(url: &str, pid: i32) -> Check {
    let Some((addr, host, path)) = split_url(url) else {
        return Check::NotYet(format!("{url} is not an http:// URL"));
    };
    let mut stream = match TcpStream::connect(&addr).await {
        Ok(stream) => stream,
        Err(e) => return Check::NotYet(format!("{addr}: {e}")),
    };
    let owner = match stream.peer_addr() {
        Ok(target) => procs::tcp_owner(target, pid),
        Err(e) => TcpOwner::Unknown(format!("no peer address: {e}")),
    };
    if let TcpOwner::Theirs(why) = owner {
        return Check::NotYet(why);
    }
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    if let Err(e) = stream.write_all(request.as_bytes()).await {
        return Check::NotYet(format!("{url}: {e}"));
    }
    let mut buf = Vec::with_capacity(STATUS_LINE_MAX_BYTES);
    let mut chunk = [0u8; 256];
    while !buf.contains(&b'\n') && buf.len() < STATUS_LINE_MAX_BYTES {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let line = text.lines().next().unwrap_or_default();
    let mut parts = line.split_whitespace();
    if !matches!(
        (parts.next(), parts.next()),
        (Some(v), Some("200")) if v.starts_with("HTTP/1.")
    ) {
        return Check::NotYet(format!("{url} answers {line:?}"));
    }
    if let TcpOwner::Unknown(why) = owner {
        tracing::warn!(%url, pid, "cannot tell who serves it ({why}): taking its 200 as the child's");
    }
    Check::Ready
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::procs::testing::Stranger;
    use tokio::net::TcpListener;

    #[test]
    fn checks_start_a_millisecond_apart_and_slow_down_to_poll_ms() {
        let delays: Vec<u64> = (0..9).map(|n| poll_delay(n).as_millis() as u64).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, POLL_MS, POLL_MS, POLL_MS]);
        assert_eq!(poll_delay(u32::MAX), Duration::from_millis(POLL_MS));
    }

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
        let me = std::process::id();
        let url = serve_once("200 OK").await;
        assert_eq!(check(&Ready::Http(url), me).await, Check::Ready);
        let url = serve_once("503 Service Unavailable").await;
        let found = check(&Ready::Http(url), me).await;
        assert!(
            matches!(&found, Check::NotYet(why) if why.contains("503")),
            "{found:?}"
        );
    }

    #[tokio::test]
    async fn http_200_from_a_server_the_child_does_not_hold_is_not_ready() {
        let stranger = Stranger::start();
        let url = serve_once("200 OK").await;
        let found = check(&Ready::Http(url), stranger.pid()).await;
        assert!(
            matches!(&found, Check::NotYet(why) if why.contains("held by a process other than the child")),
            "{found:?}"
        );
    }

    #[tokio::test]
    async fn a_socket_is_ready_once_it_accepts() {
        let me = std::process::id();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        assert!(matches!(
            check(&Ready::Socket(path.clone()), me).await,
            Check::NotYet(_)
        ));
        let _listener = tokio::net::UnixListener::bind(&path).unwrap();
        assert_eq!(check(&Ready::Socket(path), me).await, Check::Ready);
    }

    #[tokio::test]
    async fn a_socket_served_by_another_process_is_not_ready() {
        let stranger = Stranger::start();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _listener = tokio::net::UnixListener::bind(&path).unwrap();
        let found = check(&Ready::Socket(path), stranger.pid()).await;
        let me = std::process::id();
        assert!(
            matches!(&found, Check::NotYet(why) if why.contains(&format!("served by pid {me}"))),
            "{found:?}"
        );
    }
}
