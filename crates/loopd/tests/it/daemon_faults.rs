#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The loopd binary under faults an operator meets: its stderr a pipe nobody reads (boxd was
//! killed), and a full disk. Each runs the real daemon against fakellama and talks to its
//! socket.

use crate::api_common;
use crate::fake_llama;

use api_common::{json, request, send, text, turn_events};
use bxcore::{TurnEnd, TurnEvent};
use fake_llama::Fake;
use http::{Method, StatusCode};
use proto::api::error_kind;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a test waits for loopd, in milliseconds.
const WAIT_MS: u64 = 20_000;
/// How often a test looks again at what it waits for, in milliseconds.
const POLL_MS: u64 = 10;
/// The size of the small file system the full-disk test runs loopd's state on, in KiB.
const SMALL_FS_KIB: u64 = 256;

/// fakellama, and loopd started on it by a test; loopd is killed when this is dropped.
pub(crate) struct Daemon {
    pub(crate) fake: Fake,
    loopd: Child,
    pub(crate) socket: PathBuf,
    state: PathBuf,
    _dir: tempfile::TempDir,
}

impl Daemon {
    /// Starts loopd (through `wrap`, which gets the state dir and gives the command that runs
    /// the binary with the arguments that follow) with stderr as `stderr`, and waits for its
    /// socket.
    fn start(wrap: impl FnOnce(&Path) -> Command, stderr: Stdio) -> Daemon {
        Daemon::start_configured(wrap, stderr, "")
    }

    /// As [`Daemon::start`], with `extra` (TOML sections, e.g. `[broker]`) added to loopd's
    /// config.
    pub(crate) fn start_configured(
        wrap: impl FnOnce(&Path) -> Command,
        stderr: Stdio,
        extra: &str,
    ) -> Daemon {
        let fake = Fake::script("default_reply = \"done\"\n");
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
        let mut loopd = wrap(&state)
            .arg("--config")
            .arg(&config)
            // Every turn logs: the lines must go nowhere without harm.
            .env("RUST_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            if let Some(status) = loopd.try_wait().unwrap() {
                panic!("loopd exited ({status}) before serving");
            }
            assert!(Instant::now() < deadline, "loopd did not serve in time");
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
        Daemon {
            fake,
            loopd,
            socket,
            state,
            _dir: dir,
        }
    }

    /// Runs `what` on `session` and waits for its event stream to end: the status, and the
    /// events (or the error body's `kind` and message).
    fn task(&self, session: &str, what: &str) -> (StatusCode, Result<Vec<TurnEvent>, String>) {
        let body = serde_json::json!({ "session": session, "text": what }).to_string();
        let accept = [("accept", "text/event-stream")];
        let req = request(Method::POST, "/v1/tasks", &accept, &body);
        self.fake.rt.block_on(async {
            let (status, _, body) = send(&self.socket, req).await;
            if status == StatusCode::OK {
                (status, Ok(turn_events(&text(body).await)))
            } else {
                let error = json(body).await;
                let kind = error["error"]["kind"].as_str().unwrap().to_string();
                let message = error["error"]["message"].as_str().unwrap();
                (status, Err(format!("{kind}: {message}")))
            }
        })
    }

    /// The status of `GET path`.
    fn get_status(&self, path: &str) -> StatusCode {
        let req = request(Method::GET, path, &[], "");
        self.fake
            .rt
            .block_on(async { send(&self.socket, req).await.0 })
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.loopd.kill();
        let _ = self.loopd.wait();
    }
}

/// How the turn whose `events` these are ended.
fn end(events: &[TurnEvent]) -> Option<&TurnEnd> {
    events.iter().find_map(|e| match e {
        TurnEvent::Ended { end, .. } => Some(end),
        _ => None,
    })
}

#[test]
fn loopd_whose_stderr_is_a_closed_pipe_goes_on_and_finishes_its_tasks() {
    let (reader, writer) = std::io::pipe().unwrap();
    // Nobody reads loopd's stderr: every log line's write fails with EPIPE.
    drop(reader);
    let mut daemon = Daemon::start(|_| Command::new(env!("CARGO_BIN_EXE_loopd")), writer.into());
    for turn in 1..=2 {
        let (status, events) = daemon.task("s", "hello");
        assert_eq!(status, StatusCode::OK, "{events:?}");
        let events = events.unwrap();
        assert_eq!(
            end(&events),
            Some(&TurnEnd::Done),
            "turn {turn}: {events:?}"
        );
    }
    assert_eq!(daemon.get_status("/v1/sessions/s"), StatusCode::OK);
    assert!(daemon.loopd.try_wait().unwrap().is_none(), "loopd exited");
}

/// Whether this machine lets an unprivileged user mount a tmpfs in a new user and mount
/// namespace (`unshare -rm`): how the full-disk test gets a small file system without root.
fn small_fs_possible() -> bool {
    let dir = tempfile::tempdir().unwrap();
    Command::new("unshare")
        .args(["-rm", "sh", "-c", "mount -t tmpfs tmpfs \"$0\""])
        .arg(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A command that runs loopd with its state dir on a full tmpfs of [`SMALL_FS_KIB`], mounted
/// in a new user and mount namespace (`unshare -rm`, then `exec`: loopd keeps the pid).
fn on_a_full_disk(state: &Path) -> Command {
    let mut command = Command::new("unshare");
    command.args([
        "-rm",
        "sh",
        "-c",
        &format!(
            "mount -t tmpfs -o size={SMALL_FS_KIB}k tmpfs \"$0\" && \
             {{ head -c {}k /dev/zero > \"$0/filler\" 2>/dev/null; exec \"$@\"; }}",
            2 * SMALL_FS_KIB
        ),
    ]);
    command.arg(state).arg(env!("CARGO_BIN_EXE_loopd"));
    command
}

#[test]
fn a_full_disk_answers_507_with_the_reason_and_leaves_the_id_usable() {
    if !small_fs_possible() {
        // Without user namespaces there is no full disk to make without root; the engine's
        // mapping of ENOSPC is tested with the API stand-in (api_routes).
        eprintln!("skipped: this machine does not allow `unshare -rm` with a tmpfs mount");
        return;
    }
    let daemon = Daemon::start(on_a_full_disk, Stdio::null());
    let (status, answer) = daemon.task("full", "hello");
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE, "{answer:?}");
    let message = answer.unwrap_err();
    assert!(
        message.starts_with(&format!(
            "{}: disk full: ",
            error_kind::INSUFFICIENT_STORAGE
        )),
        "{message}"
    );
    assert!(message.contains("No space left on device"), "{message}");
    // Nothing of the failed creation stays: the id is unknown, as it was.
    assert_eq!(
        daemon.get_status("/v1/sessions/full"),
        StatusCode::NOT_FOUND
    );
    // The state dir as loopd sees it, inside its mount namespace.
    let inside = PathBuf::from(format!("/proc/{}/root", daemon.loopd.id()))
        .join(daemon.state.strip_prefix("/").unwrap());
    let sessions: Vec<_> = std::fs::read_dir(inside.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(sessions.is_empty(), "{sessions:?}");

    // Space is made: the same id works.
    std::fs::remove_file(inside.join("filler")).unwrap();
    let (status, events) = daemon.task("full", "hello");
    assert_eq!(status, StatusCode::OK, "{events:?}");
    assert_eq!(end(&events.unwrap()), Some(&TurnEnd::Done));
    assert_eq!(daemon.get_status("/v1/sessions/full"), StatusCode::OK);
}
