//! The `exec` tool through the broker, with the real bubblewrap: what the sandbox hides
//! (brokerd's state dir, another session's files), where it cannot write, no network unless
//! granted, an environment of its own, programs and shell lines refused without running, the
//! labels and audit line, and the fail-closed path when bubblewrap is missing.
//!
//! Skipped (with a line on stderr) when the sandbox cannot be made here, unless
//! `BOXMAKER_REQUIRE_BWRAP=1`, which `scripts/test.sh` sets: then they fail. The shim is the
//! workspace's `bxsandbox-shim`, next to this test binary's directory
//! (`cargo build --workspace --bins` builds it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{self, request};
use brokerd::audit::{AuditEvent, AuditLog};
use brokerd::builtin::exec::Sandbox;
use brokerd::config::{Grant, Limits};
use brokerd::server::{ServerOptions, bind_socket, serve};
use brokerd::{Broker, ToolSet};
use bxcore::{DataClass, DenyReason};
use bxsandbox::{ProbeOptions, Walls};
use http::{Method, StatusCode};
use proto::{Catalogue, ToolResponse};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod binds;
mod checkpoints;
mod empty_optionals;
mod fail_closed;
mod lazy_probe;
mod limits;
mod network;
mod output;
mod overlay;
mod probe_after_bind;
mod programs;
mod secrets;
mod setuid;

/// `bxsandbox-shim` in the target directory this test binary was built into.
fn shim() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/it-HASH -> target/<profile>/bxsandbox-shim
    exe.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("bxsandbox-shim")
}

/// The walls from a real probe; `None` (the test passes quietly) when they cannot be made and
/// `BOXMAKER_REQUIRE_BWRAP` is not `1`.
async fn walls() -> Option<Walls> {
    let options = ProbeOptions {
        search_path: std::env::var_os("PATH").unwrap_or_default(),
        shim: Some(shim()),
    };
    match bxsandbox::probe(&options).await {
        Ok(walls) => Some(walls),
        Err(why) if std::env::var("BOXMAKER_REQUIRE_BWRAP").as_deref() != Ok("1") => {
            eprintln!("skipped: the sandbox is {why}");
            None
        }
        Err(why) => panic!("BOXMAKER_REQUIRE_BWRAP=1 but the sandbox is {why}"),
    }
}

/// A directory tree the sandbox's user (nobody, when the tests run as root) could use if it
/// were bound: `work/` (the grant's rw_path), `outside/` (writable by all, never bound),
/// `sessions/other/notes.txt` (another session's file, readable by all) and brokerd's state
/// dir with a file readable by all; so only the sandbox's binds keep them out.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    work: PathBuf,
    outside: PathBuf,
    other_session: PathBuf,
    state_marker: PathBuf,
}

const SECRET: &str = "the other session's secret";

fn open(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        open(&root, 0o755);
        let work = root.join("work");
        let outside = root.join("outside");
        let sessions = root.join("sessions/other");
        let state = root.join("state");
        for d in [&work, &outside, &sessions, &state] {
            std::fs::create_dir_all(d).unwrap();
            open(d, 0o777);
        }
        open(&root.join("sessions"), 0o755);
        let other_session = sessions.join("notes.txt");
        std::fs::write(&other_session, SECRET).unwrap();
        open(&other_session, 0o644);
        let state_marker = state.join("marker");
        std::fs::write(&state_marker, SECRET).unwrap();
        open(&state_marker, 0o644);
        Tree {
            _dir: dir,
            root,
            work,
            outside,
            other_session,
            state_marker,
        }
    }

    /// An exec grant for every session with `keys` on top of `rw_paths = [work]`.
    fn grant(&self, keys: Value) -> Grant {
        let mut grant = json!({"tool": "exec", "rw_paths": [self.work]});
        for (k, v) in keys.as_object().unwrap() {
            grant[k] = v.clone();
        }
        serde_json::from_value(grant).unwrap()
    }

    fn broker(&self, sandbox: Sandbox, grants: Vec<Grant>) -> Broker {
        let mut cfg = common::config(&self.root, grants, Limits::default());
        cfg.state_dir = self.root.join("state");
        let tools = ToolSet::with_builtins_and_sandbox(&cfg, sandbox).unwrap();
        common::broker(&cfg, tools)
    }
}

/// Calls exec with `argv` from session `main`.
async fn exec(broker: &Broker, argv: &[&str]) -> ToolResponse {
    let args = json!({ "argv": argv }).to_string();
    let response = broker.call(&request("main", 1, "exec", &args)).await;
    eprintln!("{argv:?}: {response:?}");
    response
}

/// The result text, or a panic naming what came instead.
fn content(response: &ToolResponse) -> &str {
    match response {
        ToolResponse::Result { content, .. } => content,
        other => panic!("expected a result, got {other:?}"),
    }
}

fn succeeded(response: &ToolResponse) -> bool {
    content(response).starts_with("status: exited with status 0\n")
}

#[tokio::test]
async fn the_state_dir_and_another_sessions_files_are_not_there() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"programs": ["cat"]}))],
    );
    // The control: the same program reads a file it is given.
    std::fs::write(tree.work.join("mine.txt"), "mine").unwrap();
    let mine = exec(&b, &["cat", tree.work.join("mine.txt").to_str().unwrap()]).await;
    assert!(content(&mine).contains("mine"), "{mine:?}");
    for hidden in [
        &tree.state_marker,
        &tree.other_session,
        Path::new("/etc/shadow"),
    ] {
        let r = exec(&b, &["cat", hidden.to_str().unwrap()]).await;
        assert!(!succeeded(&r), "{hidden:?} was read: {r:?}");
        assert!(!content(&r).contains(SECRET), "{r:?}");
        assert!(content(&r).contains("No such file"), "{r:?}");
    }
}

#[tokio::test]
async fn writing_outside_rw_paths_fails() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"programs": ["touch"]}))],
    );
    let inside = tree.work.join("made");
    assert!(succeeded(
        &exec(&b, &["touch", inside.to_str().unwrap()]).await
    ));
    assert!(inside.exists());
    let outside = tree.outside.join("made");
    let r = exec(&b, &["touch", outside.to_str().unwrap()]).await;
    assert!(!succeeded(&r), "{r:?}");
    assert!(!outside.exists());
}

#[tokio::test]
async fn without_network_a_loopback_server_cannot_be_reached() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let argv = ["bash", "-c", connect.as_str()];
    let grant = |network: bool| {
        let mut g = tree.grant(json!({"programs": ["bash"], "shell": true, "network": network}));
        g.sessions = vec![if network { "net" } else { "main" }.to_owned()];
        g
    };
    let b = tree.broker(Sandbox::Ready(walls), vec![grant(false), grant(true)]);

    let r = exec(&b, &argv).await;
    assert!(!succeeded(&r), "{r:?}");
    assert!(!content(&r).contains("connected"), "{r:?}");
    assert!(listener.accept().is_err(), "a connection reached the host");
    assert!(matches!(
        r,
        ToolResponse::Result {
            class: DataClass::Private,
            untrusted: false,
            ..
        }
    ));

    // Nor with network (its own namespace: `exec::network`); and the label that network
    // brings: untrusted.
    let args = json!({ "argv": argv }).to_string();
    let r = b.call(&request("net", 1, "exec", &args)).await;
    assert!(!content(&r).contains("connected"), "{r:?}");
    assert!(listener.accept().is_err(), "a connection reached the host");
    assert!(matches!(
        r,
        ToolResponse::Result {
            class: DataClass::Private,
            untrusted: true,
            ..
        }
    ));
}

#[tokio::test]
async fn the_environment_holds_only_the_sandboxs_own_and_the_grants() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"programs": ["printenv"], "env": {"GREETING": "hello"}}))],
    );
    let r = exec(&b, &["printenv"]).await;
    let text = content(&r);
    let stdout = text
        .split_once("bytes):\n")
        .map(|(_, rest)| rest)
        .and_then(|rest| rest.split("\nstderr (").next())
        .unwrap();
    let mut names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(n, _)| n))
        .collect();
    names.sort_unstable();
    // PWD is bubblewrap's (from --chdir); the rest is the fixed list and the grant's.
    assert_eq!(
        names,
        ["GREETING", "HOME", "LANG", "PATH", "PWD", "TERM"],
        "{text}"
    );
    assert!(stdout.contains(&format!("PATH={}\n", bxsandbox::SANDBOX_PATH)));
}

/// A call refused before it ran: denied, and the marker it would have made is not there.
async fn refused_without_running(b: &Broker, argv: &[&str], marker: &Path, why: &str) {
    let r = exec(b, argv).await;
    match &r {
        ToolResponse::Denied {
            reason: DenyReason::InvalidArguments,
            detail: Some(detail),
            ..
        } => assert!(detail.contains(why), "{detail}"),
        other => panic!("expected a denial, got {other:?}"),
    }
    assert!(!marker.exists(), "the refused program ran");
}

#[tokio::test]
async fn programs_outside_the_grant_and_shell_lines_are_refused_without_running() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let b = tree.broker(
        Sandbox::Ready(walls.clone()),
        vec![tree.grant(json!({"programs": ["true", "/usr/bin/printenv"]}))],
    );
    let marker = tree.work.join("marker");
    let m = marker.to_str().unwrap();
    refused_without_running(&b, &["touch", m], &marker, "matches none").await;
    let line = format!("touch {m}");
    refused_without_running(&b, &["sh", "-c", &line], &marker, "shell = true").await;
    // The same argv runs under a grant that allows it, so the marker shows a run.
    let allowing = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"programs": ["touch"]}))],
    );
    assert!(succeeded(&exec(&allowing, &["touch", m]).await));
    assert!(marker.exists());
}

#[tokio::test]
async fn output_is_capped_and_marked_and_the_audit_line_has_the_argv_digest_and_status() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"programs": ["seq"], "max_output_bytes": 100}))],
    );
    let r = exec(&b, &["seq", "1", "1000"]).await;
    assert!(
        content(&r).contains("stdout (first 100 of 3893 bytes;"),
        "{r:?}"
    );
    assert!(matches!(
        r,
        ToolResponse::Result {
            truncated: true,
            ..
        }
    ));
    let audit = AuditLog::read(b.audit().path()).unwrap();
    let finished = audit
        .iter()
        .find(|l| l.event == AuditEvent::Finished)
        .unwrap();
    let digest = brokerd::audit::args_sha256(&json!(["seq", "1", "1000"]).to_string());
    assert_eq!(finished.argv_sha256.as_deref(), Some(digest.as_str()));
    assert_eq!(finished.exit.as_deref(), Some("exited with status 0"));
}

#[tokio::test]
async fn an_exec_asked_about_leaves_the_argv_digest_on_its_asked_line() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"programs": ["true"], "approve": "always"}))],
    );
    let r = exec(&b, &["true"]).await;
    assert!(matches!(r, ToolResponse::Ask { .. }), "{r:?}");
    let audit = AuditLog::read(b.audit().path()).unwrap();
    let asked = audit
        .iter()
        .find(|l| l.decision == brokerd::audit::AuditDecision::Asked)
        .unwrap();
    let digest = brokerd::audit::args_sha256(&json!(["true"]).to_string());
    assert_eq!(asked.argv_sha256.as_deref(), Some(digest.as_str()));
}

/// The catalogue of `main` over the socket, and brokerd's health.
async fn served(b: Broker, socket: &Path) -> (Vec<String>, Value) {
    let cfg = common::config(socket.parent().unwrap(), vec![], Limits::default());
    let options = ServerOptions::from_config(&cfg).unwrap();
    let listener = bind_socket(socket, None).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, Arc::new(b), options, async {
        let _ = stopped.await;
    }));
    let (_, bytes) = common::http(socket, Method::GET, "/v1/catalogue?session=main", None).await;
    let catalogue: Catalogue = serde_json::from_slice(&bytes).unwrap();
    let (status, health) = common::http_json(socket, Method::GET, "/v1/health", None).await;
    assert_eq!(status, StatusCode::OK);
    let _ = stop.send(());
    server.await.unwrap();
    let names = catalogue.tools.into_iter().map(|t| t.schema.name).collect();
    (names, health)
}

/// The longest [`settled_health`] asks again, in milliseconds.
const PROBE_SETTLE_WAIT_MS: u64 = 20_000;

/// brokerd's health over `socket` once its sandbox probe has settled: asked again while it
/// says `probing` (the probe runs after the socket is bound), at most
/// [`PROBE_SETTLE_WAIT_MS`].
async fn settled_health(socket: &Path) -> Value {
    let asked = std::time::Instant::now();
    loop {
        let (status, health) = common::http_json(socket, Method::GET, "/v1/health", None).await;
        assert_eq!(status, StatusCode::OK);
        if health["exec"] != "probing" {
            return health;
        }
        assert!(
            asked.elapsed() < std::time::Duration::from_millis(PROBE_SETTLE_WAIT_MS),
            "still probing"
        );
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}
