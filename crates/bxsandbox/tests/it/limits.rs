//! The limits: processes, time, output.

use crate::common::{pin, sh, walls};
use bxsandbox::{Spec, Status};
use std::time::{Duration, Instant};

/// The pids of host processes whose command line holds `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

#[tokio::test]
async fn a_fork_bomb_stops_at_max_processes() {
    let Some(walls) = walls().await else { return };
    let mut spec = Spec::new(["sh"]);
    spec.max_processes = 8;
    spec.timeout_ms = 20_000;
    // 200 children that outlive the loop: without the limit all start and "all" is printed;
    // with it a fork fails and sh gives up long before the timeout.
    let script = "i=0; while [ $i -lt 200 ]; do sleep 30 & i=$((i+1)); done; echo all";
    let outcome = sh(&walls, script, spec).await;
    assert_ne!(crate::common::stdout(&outcome), "all\n");
    assert_ne!(outcome.status, Status::TimedOut);
    let stderr = String::from_utf8_lossy(&outcome.stderr.bytes);
    assert!(stderr.contains("fork"), "{stderr}");
}

#[tokio::test]
async fn sleep_600_is_killed_at_the_timeout_and_nothing_is_left() {
    let Some(walls) = walls().await else { return };
    let marker = "600.4242";
    let mut spec = Spec::new(["sh"]);
    spec.timeout_ms = 500;
    let started = Instant::now();
    // A child in the background and one in front, both sleeping far past the timeout.
    let outcome = sh(&walls, &format!("sleep {marker} & sleep {marker}"), spec).await;
    assert_eq!(outcome.status, Status::TimedOut);
    assert!(started.elapsed() < Duration::from_secs(10));
    // The kernel tears the pid namespace down as it reaps: wait for it, with a bound.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(marker).is_empty() && Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
    assert_eq!(processes_with(marker), Vec::<u32>::new());
}

#[tokio::test]
async fn large_output_is_capped_and_counted() {
    let Some(walls) = walls().await else { return };
    let mut spec = Spec::new(["sh"]);
    spec.max_output_bytes = 1000;
    // 100 MiB on stdout, a little on stderr.
    let script = "head -c 104857600 /dev/zero; echo oops >&2";
    let outcome = sh(&walls, script, spec).await;
    assert_eq!(outcome.status, Status::Exited(0));
    assert_eq!(outcome.stdout.bytes.len(), 1000);
    assert_eq!(outcome.stdout.total_bytes, 104_857_600);
    assert!(outcome.stdout.truncated);
    assert_eq!(outcome.stderr.bytes, b"oops\n");
    assert!(!outcome.stderr.truncated);
}

#[tokio::test]
async fn cpu_and_file_size_limits_hold() {
    let Some(walls) = walls().await else { return };
    let dir = crate::common::open_dir();
    let mut spec = Spec::new(["sh"]);
    spec.rw_paths.push(pin(dir.path()));
    spec.file_size_bytes = 4096;
    let outcome = sh(&walls, "head -c 100000 /dev/zero > big", spec).await;
    assert_ne!(outcome.status, Status::Exited(0));
    assert!(std::fs::metadata(dir.path().join("big")).unwrap().len() <= 4096);

    let mut spec = Spec::new(["sh"]);
    spec.cpu_seconds = 1;
    spec.timeout_ms = 20_000;
    let outcome = sh(&walls, "while :; do :; done", spec).await;
    // SIGXCPU at the soft limit (equal to the hard one: SIGKILL).
    assert!(
        matches!(outcome.status, Status::Signalled(24 | 9)),
        "{outcome:?}"
    );
}
