#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A SIGTERM sent the moment loopd's socket accepts (what boxd counts as ready) stops it
//! cleanly. Its listener used to be put in place only when the server first polled it, after
//! the socket was bound: such a SIGTERM killed loopd outright (the default action), or was
//! lost while the listener was being put in place. Runs many starts ([`STARTS`], or
//! `$SIGTERM_TEST_STARTS`), since the moment is narrow.

use crate::fake_llama::Fake;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts, each stopped at once.
const STARTS: usize = 20;
/// The longest loopd may take to serve, and to exit after the signal.
const LIMIT: Duration = Duration::from_secs(20);
/// How often the socket is tried while loopd starts, and its exit looked for.
const POLL: Duration = Duration::from_micros(100);

#[test]
fn a_sigterm_as_soon_as_the_socket_accepts_stops_loopd_cleanly() {
    let starts = std::env::var("SIGTERM_TEST_STARTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(STARTS);
    let fake = Fake::script("default_reply = \"done\"\n");
    let system = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/system.md");
    for start in 0..starts {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("loopd.sock");
        let config = dir.path().join("loopd.toml");
        std::fs::create_dir(dir.path().join("state")).unwrap();
        std::fs::write(
            &config,
            format!(
                "socket = {socket:?}\nstate_dir = {:?}\n[llama]\nurl = {:?}\n\
                 [baseline]\nsystem = {system:?}\n",
                dir.path().join("state"),
                fake.server.url(),
            ),
        )
        .unwrap();
        // No environment: `LOOPD_*` variables would be read as config.
        let mut child = Command::new(env!("CARGO_BIN_EXE_loopd"))
            .env_clear()
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(child.try_wait().unwrap().is_none(), "loopd exited");
            assert!(started.elapsed() < LIMIT, "loopd did not serve");
            std::thread::sleep(POLL);
        }
        kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
        let signalled = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "start {start}: loopd ended {status}");
                break;
            }
            if signalled.elapsed() > LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                panic!("start {start}: loopd lost the SIGTERM sent as its socket accepted");
            }
            std::thread::sleep(POLL);
        }
    }
}
