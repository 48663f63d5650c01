//! The real `brokerd` with an MCP server and `[metrics] listen`: `/metrics` on its socket and
//! on the TCP listener, and `promtool check metrics` on what they serve (skipped without
//! `promtool`, unless `BOXMAKER_REQUIRE_PROMETHEUS=1`).

use super::{call, calls, sample, scrape};
use crate::common;
use brokerd::daemon::SERVING;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use proto::ToolResponse;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// How long the test waits for brokerd, in milliseconds.
const WAIT_MS: u64 = 30_000;
/// How often it looks again while waiting for brokerd to exit, in milliseconds.
const POLL_MS: u64 = 20;

/// A running brokerd, killed when dropped.
struct Daemon {
    dir: tempfile::TempDir,
    brokerd: Child,
    log: Receiver<String>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.brokerd.try_wait().ok().flatten().is_none() {
            let _ = self.brokerd.kill();
            let _ = self.brokerd.wait();
        }
    }
}

impl Daemon {
    /// brokerd with `echo` granted, `note` asking first, `brokerd-test-mcp` as MCP server
    /// `mock`, and a metrics listener on a port the kernel picks; and the line that says it
    /// serves.
    fn start() -> (Daemon, String) {
        let dir = tempfile::tempdir().unwrap();
        let spec = dir.path().join("spec.json");
        let tools = r#"{"tools": [{"name": "hello", "description": "d", "text": "hi", "is_error": false}]}"#;
        std::fs::write(&spec, tools).unwrap();
        let config = format!(
            "[[grants]]\ntool = \"echo\"\nsessions = [\"*\"]\n\n\
             [[grants]]\ntool = \"mock_hello\"\nsessions = [\"main\"]\napprove = \"always\"\n\n\
             [[mcp]]\nname = \"mock\"\ncommand = {server:?}\nprefix = \"mock\"\n\
             args = [\"tools\", {spec:?}]\n\n\
             [metrics]\nlisten = \"127.0.0.1:0\"\n",
            server = env!("CARGO_BIN_EXE_brokerd-test-mcp"),
            spec = spec.display().to_string(),
        );
        let cfg = dir.path().join("brokerd.toml");
        std::fs::write(&cfg, config).unwrap();
        let mut brokerd = Command::new(env!("CARGO_BIN_EXE_brokerd"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args(["--config", &cfg.display().to_string()])
            .args(["--socket", &dir.path().join("b.sock").display().to_string()])
            .args([
                "--state-dir",
                &dir.path().join("state").display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (lines, log) = std::sync::mpsc::channel();
        let pipe = brokerd.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let daemon = Daemon { dir, brokerd, log };
        let serving = daemon.wait_for_log(SERVING);
        (daemon, serving)
    }

    /// Waits for a log line containing `text`; panics with the log so far if none comes.
    fn wait_for_log(&self, text: &str) -> String {
        let mut seen = String::new();
        loop {
            let line = self
                .log
                .recv_timeout(Duration::from_millis(WAIT_MS))
                .unwrap_or_else(|e| panic!("no {text:?} in brokerd's log ({e}); log:\n{seen}"));
            if line.contains(text) {
                return line;
            }
            seen.push_str(&line);
            seen.push('\n');
        }
    }

    /// SIGTERM, then a clean exit within [`WAIT_MS`].
    fn stop(mut self) {
        kill(Pid::from_raw(self.brokerd.id() as i32), Signal::SIGTERM).unwrap();
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        let status = loop {
            if let Some(status) = self.brokerd.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "brokerd did not exit after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(POLL_MS));
        };
        assert_eq!(status.code(), Some(0), "brokerd did not stop cleanly");
    }
}

/// The metrics address in the line that says brokerd serves (`metrics=Some(ADDR)`).
fn metrics_addr(serving: &str) -> SocketAddr {
    let rest = serving
        .split_once("metrics=Some(")
        .unwrap_or_else(|| panic!("no metrics address in {serving:?}"))
        .1;
    rest.split_once(')').unwrap().0.parse().unwrap()
}

/// `GET /metrics` on the TCP listener, with `accept` when given: the whole HTTP answer.
fn scrape_tcp(addr: SocketAddr, accept: Option<&str>) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(WAIT_MS)))
        .unwrap();
    let accept = accept.map_or(String::new(), |a| format!("accept: {a}\r\n"));
    // The listener answers only a request that names it (DNS rebinding: docs/metrics.md).
    let head = format!("GET /metrics HTTP/1.1\r\nhost: {addr}\r\n{accept}\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

#[tokio::test]
async fn metrics_of_a_running_brokerd_pass_promtool_on_its_socket_and_listener() {
    let (daemon, serving) = Daemon::start();
    let socket = daemon.dir.path().join("b.sock");
    let r = call(
        &socket,
        &common::request("main", 1, "echo", r#"{"text":"hi"}"#),
    )
    .await;
    assert!(matches!(r, ToolResponse::Result { .. }), "{r:?}");
    let r = call(&socket, &common::request("other", 1, "mock_hello", "{}")).await;
    assert!(matches!(r, ToolResponse::Denied { .. }), "{r:?}");
    let r = call(&socket, &common::request("main", 1, "mock_hello", "{}")).await;
    assert!(matches!(r, ToolResponse::Ask { .. }), "{r:?}");

    let (_, text) = scrape(&socket, None).await;
    for (series, value) in [
        (calls("echo", "allowed", "none"), 1.0),
        (calls("mock_hello", "denied", "no_grant"), 1.0),
        (calls("mock_hello", "asked", "none"), 1.0),
        ("brokerd_mcp_servers_up{server=\"mock\"}".to_owned(), 1.0),
        (
            "brokerd_mcp_restarts_total{server=\"mock\"}".to_owned(),
            0.0,
        ),
    ] {
        assert_eq!(sample(&text, &series), Some(value), "{series} in\n{text}");
    }

    let addr = metrics_addr(&serving);
    assert!(addr.ip().is_loopback(), "{addr}");
    let over_tcp = scrape_tcp(addr, None);
    assert!(over_tcp.starts_with("HTTP/1.1 200"), "{over_tcp}");
    let body = over_tcp.split_once("\r\n\r\n").unwrap().1;
    assert_eq!(sample(body, &calls("echo", "allowed", "none")), Some(1.0));
    // brokerd's own build and process: this daemon's, not this test's.
    let info = format!(
        "brokerd_build_info{{version=\"{}\",",
        env!("CARGO_PKG_VERSION")
    );
    assert!(body.lines().any(|l| l.starts_with(&info)), "{body}");
    for name in bxmetrics::process::PROCESS_METRICS {
        assert!(sample(body, name).is_some(), "no {name} in\n{body}");
    }
    let started = sample(body, "process_start_time_seconds").unwrap();
    let ours = bxmetrics::process::sample().unwrap().start_time_seconds;
    assert!(started >= ours, "brokerd {started}, this test {ours}");
    let open = scrape_tcp(addr, Some("application/openmetrics-text"));
    assert!(open.ends_with("# EOF\n"), "{open}");

    if let Some(promtool) = bxmetrics::testing::promtool_or_skip() {
        bxmetrics::testing::promtool_check_with(&promtool, &text).unwrap();
        bxmetrics::testing::promtool_check_with(&promtool, body).unwrap();
    }
    daemon.stop();
}

#[test]
fn metrics_a_port_in_use_stops_brokerd_before_it_binds_its_socket() {
    // Held by the test: brokerd's `[metrics] listen` cannot bind it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("brokerd.toml");
    std::fs::write(&cfg, format!("[metrics]\nlisten = \"{addr}\"\n")).unwrap();
    let socket = dir.path().join("b.sock");
    let mut brokerd = Command::new(env!("CARGO_BIN_EXE_brokerd"))
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(["--config", &cfg.display().to_string()])
        .args(["--socket", &socket.display().to_string()])
        .args([
            "--state-dir",
            &dir.path().join("state").display().to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    let status = loop {
        if let Some(status) = brokerd.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = brokerd.kill();
            panic!("brokerd did not exit with its metrics port in use");
        }
        std::thread::sleep(Duration::from_millis(POLL_MS));
    };
    let mut log = String::new();
    brokerd
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(!status.success(), "{log}");
    assert!(log.contains("metrics.listen"), "{log}");
    // A socket file left behind would make the next start's bind fail or mislead a client.
    assert!(
        !socket.exists(),
        "the socket file was left behind; log:\n{log}"
    );
    drop(taken);
}
