//! The `brokerd` binary's command line: `--check-config`, override flags, and the daemon mode
//! run for real over a temporary socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use brokerd::audit::{AuditDecision, AuditLog};
use brokerd::daemon::SERVING;
use bxcore::DenyReason;
use http::{Method, StatusCode};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use proto::{Catalogue, ToolResponse};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/brokerd.toml");

/// Runs brokerd with `args` and no environment but `extra`.
fn brokerd(args: &[&str], extra: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_brokerd"));
    cmd.env_clear().args(args);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn cli_check_config_on_the_shipped_file_prints_toml_and_exits_0() {
    let out = brokerd(&["--check-config", SHIPPED], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("[[grants]]"), "{stdout}");
    assert!(stdout.contains("tool = \"echo\""), "{stdout}");
    assert!(stdout.contains("call_timeout_ms = 30000"), "{stdout}");
}

#[test]
fn cli_check_config_on_a_bad_file_exits_1_naming_file_and_key() {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(b"[[grants]]\ntool = \"read_file\"\npaths = [\"relative\"]\n")
        .unwrap();
    let path = f.path().display().to_string();
    let out = brokerd(&["--check-config", &path], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("{path}: key \"grants[0].paths[0]\"")),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn cli_check_config_shows_flag_overrides_and_env() {
    let out = brokerd(
        &[
            "--check-config",
            SHIPPED,
            "--socket",
            "/tmp/t/b.sock",
            "--state-dir",
            "/tmp/t/b",
        ],
        &[("BROKERD_LIMITS__CALL_TIMEOUT_MS", "1234")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("socket = \"/tmp/t/b.sock\""), "{stdout}");
    assert!(stdout.contains("state_dir = \"/tmp/t/b\""), "{stdout}");
    assert!(stdout.contains("call_timeout_ms = 1234"), "{stdout}");
}

#[test]
fn cli_check_config_bad_env_names_the_variable() {
    let out = brokerd(
        &["--check-config", SHIPPED],
        &[("BROKERD_LIMITS__CALL_TIMEOUT_MS", "soon")],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("environment variable BROKERD_LIMITS__CALL_TIMEOUT_MS"),
        "{stderr}"
    );
}

#[test]
fn cli_without_a_config_exits_2_saying_so() {
    let out = brokerd(&[], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--config FILE"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn cli_daemon_with_an_invalid_config_exits_1_naming_the_key() {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(b"[[grants]]\ntool = \"call_tool\"\n").unwrap();
    let out = brokerd(&["--config", &f.path().display().to_string()], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("grants[0].tool"),
        "{}",
        text(&out.stderr)
    );
}

/// How long the daemon test waits for a log line, in milliseconds.
const WAIT_MS: u64 = 20_000;

#[tokio::test]
async fn cli_daemon_serves_calls_audits_them_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("brokerd.sock");
    let state = dir.path().join("state");
    let cfg = dir.path().join("brokerd.toml");
    std::fs::write(
        &cfg,
        "[[grants]]\ntool = \"echo\"\nsessions = [\"main\"]\n\n[limits]\nmax_body_bytes = 4096\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_brokerd"))
        .env_clear()
        .args(["--config", &cfg.display().to_string()])
        .args(["--socket", &socket.display().to_string()])
        .args(["--state-dir", &state.display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, stderr) = std::sync::mpsc::channel();
    let pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let wait = Duration::from_millis(WAIT_MS);
    let mut log = String::new();
    loop {
        let line = stderr
            .recv_timeout(wait)
            .unwrap_or_else(|e| panic!("no \"{SERVING}\" ({e}); log:\n{log}"));
        log.push_str(&line);
        log.push('\n');
        if line.contains(SERVING) {
            break;
        }
    }

    let (status, health) = common::http_json(&socket, Method::GET, "/v1/health", None).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    // No grant names exec, so the daemon did not probe the sandbox (`exec::lazy_probe`):
    // exec fails closed, and health says why.
    assert_eq!(
        health["exec"], "unavailable: not probed, since no grant names exec",
        "{health}"
    );
    let (_, bytes) = common::http(&socket, Method::GET, "/v1/catalogue?session=main", None).await;
    let catalogue: Catalogue = serde_json::from_slice(&bytes).unwrap();
    let names: Vec<_> = catalogue
        .tools
        .iter()
        .map(|t| t.schema.name.as_str())
        .collect();
    assert_eq!(names, ["echo"]);
    let call = common::request("main", 1, "echo", r#"{"text":"private words"}"#);
    let (_, bytes) = common::http(
        &socket,
        Method::POST,
        "/v1/call",
        Some(serde_json::to_vec(&call).unwrap()),
    )
    .await;
    let response: ToolResponse = serde_json::from_slice(&bytes).unwrap();
    assert!(
        matches!(&response, ToolResponse::Result { content, .. } if content == "private words"),
        "{response:?}"
    );
    let call = common::request("heartbeat", 1, "echo", r#"{"text":"x"}"#);
    let (_, bytes) = common::http(
        &socket,
        Method::POST,
        "/v1/call",
        Some(serde_json::to_vec(&call).unwrap()),
    )
    .await;
    let response: ToolResponse = serde_json::from_slice(&bytes).unwrap();
    assert!(
        matches!(
            response,
            ToolResponse::Denied {
                reason: DenyReason::NoGrant,
                ..
            }
        ),
        "{response:?}"
    );

    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    kill(pid, Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    while let Ok(line) = stderr.recv_timeout(wait) {
        log.push_str(&line);
        log.push('\n');
    }
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("SIGTERM"), "{log}");
    assert!(!socket.exists(), "the socket is removed at exit");

    let audit_path = state.join("audit.jsonl");
    let audit = std::fs::read_to_string(&audit_path).unwrap();
    assert!(!audit.contains("private words"), "{audit}");
    let records = AuditLog::read(&audit_path).unwrap();
    let decisions: Vec<_> = records
        .iter()
        .map(|r| (r.session.as_str(), r.decision))
        .collect();
    // The allowed call: its decision before it ran, then its outcome.
    assert_eq!(
        decisions,
        [
            ("main", AuditDecision::Allowed),
            ("main", AuditDecision::Allowed),
            ("heartbeat", AuditDecision::Denied)
        ]
    );
}
