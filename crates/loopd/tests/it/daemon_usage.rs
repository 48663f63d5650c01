#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The usage accounts and the metrics of the real loopd binary against fakellama: the
//! accounts survive a kill -9 after the turns ended, a corrupt day stops loopd naming the file,
//! and `/metrics` answers on the socket and on `[metrics] listen`, until loopd stops.

use crate::api_common;
use crate::fake_llama::Fake;

use api_common::{get, json, request, send, text, turn_events};
use bxcore::{TurnEnd, TurnEvent};
use http::{Method, StatusCode};
use proto::api::UsageReport;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a test waits for loopd, in milliseconds.
const WAIT_MS: u64 = 20_000;
/// How often a test looks again at what it waits for, in milliseconds.
const POLL_MS: u64 = 10;

/// Tasks with "tools" call `clock`; the rest answer `done`.
const SCRIPT: &str = r#"default_reply = "done"
[[rule]]
when_role = "user"
when_contains = "tools"
tool_calls = [{ name = "clock", arguments = "{}" }]
"#;

/// fakellama and a loopd config on a state dir that outlives loopd's restarts.
struct Setup {
    fake: Fake,
    dir: tempfile::TempDir,
    socket: PathBuf,
    config: PathBuf,
}

impl Setup {
    fn new(extra: &str) -> Setup {
        let fake = Fake::script(SCRIPT);
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("loopd.sock");
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let system = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/system.md");
        let config = dir.path().join("loopd.toml");
        std::fs::write(
            &config,
            format!(
                "socket = {socket:?}\nstate_dir = {state:?}\n[llama]\nurl = {:?}\n\
                 [baseline]\nsystem = {system:?}\n{extra}",
                fake.server.url(),
            ),
        )
        .unwrap();
        Setup {
            fake,
            dir,
            socket,
            config,
        }
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_loopd"));
        command
            .arg("--config")
            .arg(&self.config)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        command
    }

    /// Starts loopd and waits for its socket.
    fn start(&self) -> Running {
        let mut loopd = self.command().stderr(Stdio::null()).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            if let Some(status) = loopd.try_wait().unwrap() {
                panic!("loopd exited ({status}) before serving");
            }
            assert!(Instant::now() < deadline, "loopd did not serve in time");
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
        Running(loopd)
    }

    /// Runs `what` on `session` to its end.
    fn task(&self, session: &str, what: &str) -> Vec<TurnEvent> {
        let body = serde_json::json!({ "session": session, "text": what }).to_string();
        let accept = [("accept", "text/event-stream")];
        let req = request(Method::POST, "/v1/tasks", &accept, &body);
        self.fake.rt.block_on(async {
            let (status, _, body) = send(&self.socket, req).await;
            assert_eq!(status, StatusCode::OK);
            turn_events(&text(body).await)
        })
    }

    /// `GET path`: status and body.
    fn get(&self, path: &str) -> (StatusCode, String) {
        self.fake.rt.block_on(async {
            let (status, _, body) = send(&self.socket, get(path)).await;
            (status, text(body).await)
        })
    }
}

/// A running loopd; killed (SIGKILL) when dropped.
struct Running(Child);

impl Running {
    /// kill -9, and wait for it to be gone.
    fn kill(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ended_done(events: &[TurnEvent]) -> bool {
    events.iter().any(|e| {
        matches!(
            e,
            TurnEvent::Ended {
                end: TurnEnd::Done,
                ..
            }
        )
    })
}

#[test]
fn the_accounts_of_ended_turns_survive_a_kill_9() {
    let setup = Setup::new("");
    let loopd = setup.start();
    assert!(ended_done(&setup.task("a", "use the tools")));
    assert!(ended_done(&setup.task("b", "hello")));
    let (status, body) = setup.get("/v1/usage");
    assert_eq!(status, StatusCode::OK, "{body}");
    let before: UsageReport = serde_json::from_str(&body).unwrap();
    assert_eq!(before.totals.turns, 2);
    assert_eq!(before.totals.tool_calls, 1);
    assert_eq!(before.sessions.len(), 2);
    loopd.kill();

    let _loopd = setup.start();
    let (_, body) = setup.get("/v1/usage");
    let after: UsageReport = serde_json::from_str(&body).unwrap();
    assert_eq!(after, before);
    let (_, body) = setup.get("/v1/usage?session=a");
    let a: UsageReport = serde_json::from_str(&body).unwrap();
    assert_eq!((a.day, a.totals.turns, a.totals.tool_calls), (None, 1, 1));
    let status: serde_json::Value = setup
        .fake
        .rt
        .block_on(async { json(send(&setup.socket, get("/v1/status")).await.2).await });
    assert_eq!(status["usage"]["totals"]["turns"], 2);
    assert_eq!(status["usage"]["day"], before.day.unwrap());
}

#[test]
fn a_corrupt_day_of_the_accounts_stops_loopd_naming_the_file() {
    let setup = Setup::new("");
    let usage = setup.state().join("usage");
    std::fs::create_dir(&usage).unwrap();
    std::fs::write(usage.join("2026-12-01.json"), "{\"day\":").unwrap();
    let out = setup.command().stderr(Stdio::piped()).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("usage accounts") && stderr.contains("usage/2026-12-01.json"),
        "{stderr}"
    );
    assert!(!setup.socket.exists(), "it never served");
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `GET /metrics` over TCP at `port`: the status line and the body.
fn tcp_metrics(port: u16) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(WAIT_MS)))
        .unwrap();
    // The listener answers only a request that names it (DNS rebinding: docs/metrics.md).
    let head =
        format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[test]
fn metrics_answer_on_the_socket_and_on_the_tcp_listener_until_loopd_stops() {
    let port = free_port();
    let setup = Setup::new(&format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"));
    let mut loopd = setup.start();
    assert!(ended_done(&setup.task("a", "use the tools")));
    let (status, on_socket) = setup.get("/metrics");
    assert_eq!(status, StatusCode::OK);
    for line in [
        "loopd_turns_total{outcome=\"done\"} 1",
        "loopd_tool_calls_total{tool=\"clock\",outcome=\"ok\"} 1",
        "loopd_model_calls_total{role=\"main\"} 2",
    ] {
        assert!(
            on_socket.lines().any(|l| l == line),
            "no {line:?} in\n{on_socket}"
        );
    }
    let appends = on_socket
        .lines()
        .find_map(|l| l.strip_prefix("loopd_log_append_duration_seconds_count "))
        .unwrap();
    assert!(appends.parse::<u64>().unwrap() >= 4, "{appends}");
    let (status_line, on_tcp) = tcp_metrics(port);
    assert!(status_line.contains("200"), "{status_line}");
    assert!(
        on_tcp.contains("loopd_turns_total{outcome=\"done\"} 1"),
        "{on_tcp}"
    );
    // loopd's own build and process, and the speed's counters (two timed calls).
    let info = format!(
        "loopd_build_info{{version=\"{}\",",
        env!("CARGO_PKG_VERSION")
    );
    assert!(on_tcp.lines().any(|l| l.starts_with(&info)), "{on_tcp}");
    for name in bxmetrics::process::PROCESS_METRICS {
        let sample = format!("{name} ");
        assert!(
            on_tcp.lines().any(|l| l.starts_with(&sample)),
            "no {name} in\n{on_tcp}"
        );
    }
    assert!(
        on_tcp.contains("loopd_generation_seconds_total{role=\"main\"} "),
        "{on_tcp}"
    );

    // SIGTERM: loopd stops, its listener with it.
    let term = Command::new("kill")
        .args(["-TERM", &loopd.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    let status = loop {
        if let Some(status) = loopd.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "loopd did not stop in time");
        std::thread::sleep(Duration::from_millis(POLL_MS));
    };
    assert!(status.success(), "{status}");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn a_metrics_port_in_use_stops_loopd_naming_the_key() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let setup = Setup::new(&format!("[metrics]\nlisten = \"127.0.0.1:{port}\"\n"));
    let out = setup.command().stderr(Stdio::piped()).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("metrics.listen = \"127.0.0.1:{port}\"")),
        "{stderr}"
    );
    // Refused before anything began: no socket served, so no task and no schedule's run
    // (the scheduler starts after the socket) was in flight when loopd exited.
    assert!(!stderr.contains("loopd is serving"), "{stderr}");
    assert!(!setup.socket.exists(), "loopd made its socket first");
}
