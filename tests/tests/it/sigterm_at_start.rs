#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A SIGTERM sent the moment a daemon's socket accepts (what boxd counts as ready) stops it
//! cleanly, for brokerd and loopd. Their listeners used to be put in place only after the
//! socket was bound: such a SIGTERM killed the daemon outright (the default action, before
//! brokerd flushed its audit log), or landed while the listener was being put in place and was
//! lost, and the daemon served on until a second signal (the cold-start bench hung so about
//! once in a few hundred starts). The moment is narrow, so each daemon is started many times
//! ([`STARTS`], or `$SIGTERM_TEST_STARTS`); a lost signal fails by name instead of hanging.

use e2e::{Stack, StackOptions, binary, workspace_root};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts of each daemon, each stopped at once.
const STARTS: usize = 20;
/// The longest a daemon may take to serve, and to exit after the signal.
const LIMIT: Duration = Duration::from_secs(20);
/// How often the socket is tried while a daemon starts, and its exit looked for.
const POLL: Duration = Duration::from_micros(100);

/// Starts `daemon` ([`STARTS`] times): `config` writes its config in a new directory and gives
/// the file and the socket. Each start gets SIGTERM as soon as the socket accepts and must
/// exit with success.
fn stops_cleanly_when_signalled_as_it_serves(
    daemon: &str,
    config: impl Fn(&Path) -> (PathBuf, PathBuf),
) {
    let starts = std::env::var("SIGTERM_TEST_STARTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(STARTS);
    for start in 0..starts {
        let dir = tempfile::tempdir().unwrap();
        let (file, socket) = config(dir.path());
        // No environment: `BROKERD_*`/`LOOPD_*` variables would be read as config.
        let mut child = Command::new(binary(daemon))
            .env_clear()
            .arg("--config")
            .arg(&file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(child.try_wait().unwrap().is_none(), "{daemon} exited");
            assert!(started.elapsed() < LIMIT, "{daemon} did not serve");
            std::thread::sleep(POLL);
        }
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
        let signalled = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "start {start}: {daemon} ended {status}");
                break;
            }
            if signalled.elapsed() > LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                panic!("start {start}: {daemon} lost the SIGTERM sent as its socket accepted");
            }
            std::thread::sleep(POLL);
        }
    }
}

#[test]
fn a_sigterm_as_soon_as_the_socket_accepts_stops_brokerd() {
    stops_cleanly_when_signalled_as_it_serves("brokerd", |dir| {
        let (file, socket) = (dir.join("brokerd.toml"), dir.join("brokerd.sock"));
        std::fs::write(
            &file,
            format!(
                "socket = {socket:?}\nstate_dir = {:?}\n[[grants]]\ntool = \"clock\"\n",
                dir.join("state")
            ),
        )
        .unwrap();
        (file, socket)
    });
}

#[test]
fn a_sigterm_as_soon_as_the_socket_accepts_stops_loopd_cleanly() {
    // The stack's fakellama is the model server every start talks to.
    let stack = Stack::start(StackOptions::default()).unwrap();
    let system = workspace_root().join("config/system.md");
    stops_cleanly_when_signalled_as_it_serves("loopd", |dir| {
        let (file, socket) = (dir.join("loopd.toml"), dir.join("loopd.sock"));
        let state = dir.join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::write(
            &file,
            format!(
                "socket = {socket:?}\nstate_dir = {state:?}\n[llama]\nurl = {:?}\n\
                 [baseline]\nsystem = {system:?}\n",
                stack.llama_url,
            ),
        )
        .unwrap();
        (file, socket)
    });
}
