//! Issue 36, cold start: the sandbox probe (two trial sandboxes, ~11 ms) runs only when a
//! grant names `exec`, and only once the socket is bound (health says `probing` meanwhile). A brokerd no grant lets run `exec` never starts bubblewrap, and its
//! health says why it did not probe. The `bwrap` on the daemon's `PATH` here is a script that
//! leaves a marker when anything starts it.

use http::Method;
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

/// How long the test waits for brokerd to say it serves, in milliseconds.
const SERVING_WAIT_MS: u64 = 20_000;
/// A grant of `exec`, so brokerd probes.
const EXEC_GRANT: &str = "[[grants]]\ntool = \"exec\"\nprograms = [\"true\"]\n";

/// A brokerd started with a marking `bwrap` ([`start_with_bwrap`]).
struct Started {
    child: std::process::Child,
    socket: std::path::PathBuf,
    marker: std::path::PathBuf,
    gate: std::path::PathBuf,
}

impl Started {
    async fn health(&self) -> Value {
        let (status, health) =
            crate::common::http_json(&self.socket, Method::GET, "/v1/health", None).await;
        assert_eq!(status, http::StatusCode::OK);
        health
    }

    /// Health once the probe has settled.
    async fn settled_health(&self) -> Value {
        super::settled_health(&self.socket).await
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs brokerd on `grants` (TOML) with a `PATH` holding only a `bwrap` that marks
/// `dir/marks/bwrap-ran` and fails; with `gated`, it fails only once `dir/marks/gate` exists.
/// Returns once brokerd says it serves.
/// What the daemon's health says of its checkpoints before any write.
const NONE_KEPT: &str = "0 write(s) of 0 session(s) kept, 0 of 67108864 bytes";

fn start_with_bwrap(dir: &Path, grants: &str, gated: bool) -> Started {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    // As root, the probe starts bubblewrap as a fallback user: it must reach the marker.
    let marks = dir.join("marks");
    std::fs::create_dir(&marks).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&marks, std::fs::Permissions::from_mode(0o777)).unwrap();
    let marker = marks.join("bwrap-ran");
    let bwrap = bin.join("bwrap");
    let gate = marks.join("gate");
    let wait = if gated {
        format!("while [ ! -e '{}' ]; do sleep 0.01; done\n", gate.display())
    } else {
        String::new()
    };
    std::fs::write(
        &bwrap,
        format!("#!/bin/sh\n: > '{}'\n{wait}exit 1\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = dir.join("brokerd.toml");
    std::fs::write(&cfg, grants).unwrap();
    let socket = dir.join("brokerd.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_brokerd"))
        .env_clear()
        .env("PATH", &bin)
        .args(["--config", &cfg.display().to_string()])
        .args(["--socket", &socket.display().to_string()])
        .args(["--state-dir", &dir.join("state").display().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::common::wait_serving(&mut child, SERVING_WAIT_MS);
    Started {
        child,
        socket,
        marker,
        gate,
    }
}

#[tokio::test]
async fn without_a_grant_of_exec_bubblewrap_is_never_started_and_health_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let started = start_with_bwrap(dir.path(), "[[grants]]\ntool = \"echo\"\n", false);
    let health = started.health().await;
    assert!(!started.marker.exists(), "the probe started bubblewrap");
    assert_eq!(
        health,
        json!({
            "status": "ok",
            "exec": "unavailable: not probed, since no grant names exec",
            "checkpoints": NONE_KEPT
        })
    );
}

#[tokio::test]
async fn with_a_grant_of_exec_the_probe_runs() {
    let dir = tempfile::tempdir().unwrap();
    let started = start_with_bwrap(dir.path(), EXEC_GRANT, false);
    let health = started.settled_health().await;
    assert!(
        started.marker.exists(),
        "the probe never started bubblewrap"
    );
    let exec = health["exec"].as_str().unwrap();
    assert!(exec.starts_with("unavailable: "), "{exec}");
}

#[tokio::test]
async fn brokerd_answers_while_its_sandbox_is_probed_and_health_says_probing() {
    let dir = tempfile::tempdir().unwrap();
    // Its bwrap waits for the gate: the probe cannot end before the test opens it.
    let started = start_with_bwrap(dir.path(), EXEC_GRANT, true);
    assert_eq!(
        started.health().await,
        json!({"status": "ok", "exec": "probing", "checkpoints": NONE_KEPT})
    );
    std::fs::write(&started.gate, "").unwrap();
    let health = started.settled_health().await;
    let exec = health["exec"].as_str().unwrap();
    assert!(exec.starts_with("unavailable: "), "{exec}");
}
