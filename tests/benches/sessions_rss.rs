//! loopd's resident memory idle and through a burst of sessions: loopd (release build, fake
//! tools, fakellama as its model) is started, its `VmRSS` read once it serves, then
//! [`SESSIONS`] sessions each run [`TURNS`] tasks with an owner's message of
//! [`MESSAGE_BYTES`] bytes, [`CLIENTS`] at a time through `boxctl task`. `VmRSS` is read after
//! the burst and again after [`SETTLE`] (what loopd gives back once idle), with the peak
//! (`VmHWM`).
//!
//! `cargo build --release -p loopd -p boxctl -p fakellama --bins &&
//! cargo bench -p e2e --bench sessions_rss`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

mod support;

use e2e::workspace_root;
use std::process::Command;
use std::time::Duration;
use support::{boxctl_task, fakellama, release, rss_kib, start_until, status_kib, stop};

/// Sessions in the burst.
const SESSIONS: usize = 200;
/// Tasks each session runs.
const TURNS: usize = 3;
/// The owner's message of each task, in bytes.
const MESSAGE_BYTES: usize = 2_000;
/// `boxctl task`s in flight at once.
const CLIENTS: usize = 8;
/// How long loopd is left idle after the burst before `VmRSS` is read again.
const SETTLE: Duration = Duration::from_secs(2);

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let (mut model, llama_url) = fakellama(dir.path());
    let socket = dir.path().join("loopd.sock");
    let config = dir.path().join("loopd.toml");
    std::fs::write(
        &config,
        format!(
            "socket = {socket:?}\nstate_dir = {:?}\n[llama]\nurl = {llama_url:?}\n\
             [baseline]\nsystem = {:?}\n",
            dir.path().join("state"),
            workspace_root().join("config/system.md"),
        ),
    )
    .unwrap();
    let mut command = Command::new(release("loopd"));
    command.arg("--config").arg(&config);
    let (loopd, _) = start_until(command, &socket);
    let pid = loopd.id();
    println!("loopd RSS idle: {} KiB", rss_kib(pid));

    let message = "a line of the owner's notes. ".repeat(MESSAGE_BYTES / 30);
    for turn in 0..TURNS {
        std::thread::scope(|scope| {
            for client in 0..CLIENTS {
                let (socket, message) = (&socket, &message);
                scope.spawn(move || {
                    for n in (client..SESSIONS).step_by(CLIENTS) {
                        boxctl_task(
                            socket,
                            &["--session", &format!("s{n}"), &format!("{turn}: {message}")],
                        );
                    }
                });
            }
        });
    }
    println!(
        "loopd RSS after {SESSIONS} sessions of {TURNS} tasks: {} KiB (peak {} KiB)",
        rss_kib(pid),
        status_kib(pid, "VmHWM:")
    );
    // Idle time, not synchronisation: what loopd holds once nothing runs.
    std::thread::sleep(SETTLE);
    println!(
        "loopd RSS {} s after the burst: {} KiB",
        SETTLE.as_secs(),
        rss_kib(pid)
    );
    stop(loopd);
    let _ = model.kill();
    let _ = model.wait();
}
