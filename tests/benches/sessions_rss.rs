//! loopd's resident memory idle and through a burst of sessions: loopd (release build, fake
//! tools, fakellama as its model) is started, its `VmRSS` read once it serves, then
//! [`SESSIONS`] sessions each run [`TURNS`] tasks with an owner's message of
//! [`MESSAGE_BYTES`] bytes, [`CLIENTS`] at a time through `boxctl task`. `VmRSS` is read after
//! the burst and again after [`SETTLE`] (what loopd gives back once idle), with the peak
//! (`VmHWM`). All of it twice: with glibc's allocator as it comes, and with the
//! `GLIBC_TUNABLES` the shipped `config/boxd.toml` gives loopd (one arena, a fixed trim
//! threshold: memory freed after a burst goes back to the system).
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

/// `VmRSS` and what it is made of: anonymous memory (the heap, stacks) and mapped files (the
/// code, shared with the page cache), with the thread count.
fn resident(pid: u32) -> String {
    format!(
        "{} KiB ({} KiB anonymous, {} KiB files; {} threads)",
        rss_kib(pid),
        status_kib(pid, "RssAnon:"),
        status_kib(pid, "RssFile:"),
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .unwrap()
            .trim()
            .to_owned()
    )
}

fn main() {
    measure("glibc's defaults", None);
    let shipped = shipped_tunables();
    measure(&format!("GLIBC_TUNABLES={shipped}"), Some(&shipped));
}

/// The `GLIBC_TUNABLES` the shipped `config/boxd.toml` sets for loopd.
fn shipped_tunables() -> String {
    let text = std::fs::read_to_string(workspace_root().join("config/boxd.toml")).unwrap();
    let config: toml::Table = toml::from_str(&text).unwrap();
    config["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str() == Some("loopd"))
        .and_then(|c| c.get("env")?.get("GLIBC_TUNABLES")?.as_str())
        .expect("config/boxd.toml gives loopd GLIBC_TUNABLES")
        .to_owned()
}

/// One run of the bench, loopd started with `tunables` as its `GLIBC_TUNABLES` (none: unset).
fn measure(label: &str, tunables: Option<&str>) {
    println!("{label}:");
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
    match tunables {
        Some(tunables) => command.env("GLIBC_TUNABLES", tunables),
        None => command.env_remove("GLIBC_TUNABLES"),
    };
    let (loopd, _) = start_until(command, &socket);
    let pid = loopd.id();
    println!("loopd RSS idle: {}", resident(pid));

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
        "loopd RSS after {SESSIONS} sessions of {TURNS} tasks: {} (peak {} KiB)",
        resident(pid),
        status_kib(pid, "VmHWM:")
    );
    // Idle time, not synchronisation: what loopd holds once nothing runs.
    std::thread::sleep(SETTLE);
    println!(
        "loopd RSS {} s after the burst: {}",
        SETTLE.as_secs(),
        resident(pid)
    );
    stop(loopd);
    let _ = model.kill();
    let _ = model.wait();
}
