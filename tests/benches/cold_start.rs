//! Cold start (issue 36): how long each daemon takes from its start until its socket accepts,
//! and a cold one-shot: with fakellama already up, brokerd and loopd started (one after the
//! other, as boxd did; and together, as boxd does with `with_previous` on loopd), one text
//! task through `boxctl task`, and both stopped with SIGTERM and waited for. brokerd is
//! measured twice: with no grant of `exec` (the shipped config; no sandbox probe) and with one
//! (the probe's two trial sandboxes).
//!
//! Sockets are polled every `support::POLL_US` µs, so a figure is at most that late. The resident
//! memory of both daemons after the task (`VmRSS`) is printed too.
//!
//! `cargo build --release -p brokerd -p loopd -p boxctl -p fakellama -p bxsandbox --bins &&
//! cargo bench -p e2e --bench cold_start`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

mod support;

use e2e::workspace_root;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{
    boxctl_task, fakellama, release, report, report_kib, rss_kib, spawn_quiet, start_until, stop,
    wait_serving,
};

/// Runs of each measure, after one of warm-up (page cache, the shim's copy).
const RUNS: usize = 30;
/// brokerd's grants in the shipped config's manner: no `exec`.
const GRANTS: &str = "[[grants]]\ntool = \"clock\"\n[[grants]]\ntool = \"echo\"\n";
/// The same with `exec` granted, so brokerd probes the sandbox.
const GRANTS_WITH_EXEC: &str =
    "[[grants]]\ntool = \"clock\"\n[[grants]]\ntool = \"exec\"\nprograms = [\"true\"]\n";

/// The configs of one cold start in `dir`: brokerd's (with `grants`) and loopd's (against
/// fakellama at `llama_url` and that brokerd).
struct Layout {
    brokerd_config: PathBuf,
    brokerd_socket: PathBuf,
    loopd_config: PathBuf,
    loopd_socket: PathBuf,
}

impl Layout {
    fn new(dir: &Path, grants: &str, llama_url: &str) -> Layout {
        let layout = Layout {
            brokerd_config: dir.join("brokerd.toml"),
            brokerd_socket: dir.join("brokerd.sock"),
            loopd_config: dir.join("loopd.toml"),
            loopd_socket: dir.join("loopd.sock"),
        };
        std::fs::write(
            &layout.brokerd_config,
            format!(
                "socket = {:?}\nstate_dir = {:?}\n{grants}",
                layout.brokerd_socket,
                dir.join("brokerd-state")
            ),
        )
        .unwrap();
        std::fs::write(
            &layout.loopd_config,
            format!(
                "socket = {:?}\nstate_dir = {:?}\n[llama]\nurl = {llama_url:?}\n\
                 [broker]\nsocket = {:?}\n[baseline]\nsystem = {:?}\n",
                layout.loopd_socket,
                dir.join("loopd-state"),
                layout.brokerd_socket,
                workspace_root().join("config/system.md"),
            ),
        )
        .unwrap();
        layout
    }

    fn brokerd(&self) -> Command {
        let mut command = Command::new(release("brokerd"));
        command.arg("--config").arg(&self.brokerd_config);
        command
    }

    fn loopd(&self) -> Command {
        let mut command = Command::new(release("loopd"));
        command.arg("--config").arg(&self.loopd_config);
        command
    }
}

/// The time until brokerd with `grants` serves, `RUNS` times.
fn brokerd_starts(grants: &str, llama_url: &str) -> Vec<Duration> {
    (0..=RUNS)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            let layout = Layout::new(dir.path(), grants, llama_url);
            let (child, took) = start_until(layout.brokerd(), &layout.brokerd_socket);
            stop(child);
            took
        })
        .skip(1)
        .collect()
}

/// What one cold one-shot measured.
struct OneShot {
    /// From loopd's start until its socket accepted.
    loopd_start: Duration,
    /// The whole: both started, the task, both stopped.
    whole: Duration,
    /// brokerd's and loopd's resident memory after the task, in KiB.
    rss_kib: (u64, u64),
}

/// How a one-shot starts its daemons.
#[derive(Clone, Copy)]
enum Order {
    /// loopd once brokerd's socket accepts (boxd before `with_previous`).
    OneAfterTheOther,
    /// Both at once (boxd with `with_previous` on loopd, as the shipped layouts have it):
    /// loopd waits for brokerd's answer itself.
    Together,
}

/// One cold one-shot: brokerd (with `grants`) and loopd started in `order`, one task, both
/// stopped.
fn one_shot(llama_url: &str, grants: &str, order: Order) -> OneShot {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::new(dir.path(), grants, llama_url);
    let started = Instant::now();
    let mut brokerd = spawn_quiet(layout.brokerd(), &layout.brokerd_socket);
    if let Order::OneAfterTheOther = order {
        wait_serving(&mut brokerd, &layout.brokerd_socket, started);
    }
    let (loopd, loopd_took) = start_until(layout.loopd(), &layout.loopd_socket);
    // At once, since loopd serves only once brokerd has answered.
    wait_serving(&mut brokerd, &layout.brokerd_socket, started);
    boxctl_task(&layout.loopd_socket, &["hello"]);
    let stopping = Instant::now();
    let rss_kib = (rss_kib(brokerd.id()), rss_kib(loopd.id()));
    let reading = stopping.elapsed();
    stop(loopd);
    stop(brokerd);
    OneShot {
        loopd_start: loopd_took,
        // Reading /proc is the bench's, not the product's.
        whole: started.elapsed() - reading,
        rss_kib,
    }
}

/// [`RUNS`] cold one-shots after one of warm-up.
fn one_shots(llama_url: &str, grants: &str, order: Order) -> Vec<OneShot> {
    (0..=RUNS)
        .map(|_| one_shot(llama_url, grants, order))
        .skip(1)
        .collect()
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let (mut model, llama_url) = fakellama(dir.path());
    report(
        "brokerd start to socket, no exec grant",
        brokerd_starts(GRANTS, &llama_url),
    );
    report(
        "brokerd start to socket, exec granted (sandbox probe)",
        brokerd_starts(GRANTS_WITH_EXEC, &llama_url),
    );
    let runs: Vec<OneShot> = one_shots(&llama_url, GRANTS, Order::OneAfterTheOther);
    report(
        "loopd start to socket (brokerd up)",
        runs.iter().map(|r| r.loopd_start).collect(),
    );
    report(
        "cold one-shot: brokerd, then loopd, one task, both stopped",
        runs.iter().map(|r| r.whole).collect(),
    );
    let together: Vec<OneShot> = one_shots(&llama_url, GRANTS, Order::Together);
    report(
        "cold one-shot: brokerd and loopd together, one task, both stopped",
        together.iter().map(|r| r.whole).collect(),
    );
    // The first turn's catalogue waits for the sandbox probe, which runs beside both starts.
    let with_exec: Vec<OneShot> = one_shots(&llama_url, GRANTS_WITH_EXEC, Order::Together);
    report(
        "cold one-shot with exec granted: together, one task, both stopped",
        with_exec.iter().map(|r| r.whole).collect(),
    );
    report_kib(
        "brokerd RSS after one task",
        runs.iter().map(|r| r.rss_kib.0).collect(),
    );
    report_kib(
        "loopd RSS after one task",
        runs.iter().map(|r| r.rss_kib.1).collect(),
    );
    let _ = model.kill();
    let _ = model.wait();
}
