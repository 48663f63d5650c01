//! The grant's limits through the broker: a fork bomb stops at `max_processes` and the call
//! returns; `sleep 600` past a call's `timeout_ms` is reported timed out and leaves no process.
//! (100 MB of output against a real brokerd's memory is in `output`.)

use super::*;
use std::time::{Duration, Instant};

/// How long a test waits for the host's process table to show (or drop) a process, in
/// milliseconds: the kernel reaps a pid namespace's processes as it tears it down.
const PROCESS_WAIT_MS: u64 = 10_000;
/// How often that wait looks, in milliseconds.
const POLL_MS: u64 = 10;

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

/// Waits (bounded) until `done` holds for the processes with `marker`; whether it did.
async fn until_processes(marker: &str, done: impl Fn(&[u32]) -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_millis(PROCESS_WAIT_MS);
    loop {
        if done(&processes_with(marker)) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
}

/// Calls exec with the JSON arguments `args` from session `main`.
async fn exec_args(broker: &Broker, args: Value) -> ToolResponse {
    let response = broker
        .call(&request("main", 1, "exec", &args.to_string()))
        .await;
    eprintln!("{args}: {response:?}");
    response
}

/// The stdout section of a result text.
fn stdout_of(text: &str) -> &str {
    text.split_once("bytes):\n")
        .map(|(_, rest)| rest)
        .and_then(|rest| rest.split("\nstderr (").next())
        .unwrap_or("")
}

// Checked against a missing wall: the control below is the same script with max_processes
// raised past the children it starts, and it prints "all"; with the bomb's grant raised to
// 200 as well, the first half fails (tried).
#[tokio::test]
async fn a_fork_bomb_stops_at_max_processes_and_the_call_returns() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    // 50 children that outlive the loop: a fork fails once the sandbox's user holds
    // max_processes, and the shell gives up long before the timeout.
    let script = "i=0; while [ $i -lt 50 ]; do sleep 30 & i=$((i+1)); done; echo all";
    let argv = json!(["sh", "-c", script]);
    let grant = |session: &str, max_processes: u64| {
        let mut g = tree.grant(json!({
            "shell": true,
            "max_processes": max_processes,
            "timeout_ms": 20_000,
        }));
        g.sessions = vec![session.to_owned()];
        g
    };
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![grant("main", 8), grant("roomy", 200)],
    );
    let started = Instant::now();
    let r = exec_args(&b, json!({ "argv": argv })).await;
    let text = content(&r);
    assert!(!text.contains("timed out"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(15), "{text}");
    assert!(!stdout_of(text).contains("all"), "{text}");
    assert!(text.contains("fork"), "{text}");

    // The control: the same script with room for every child forks them all.
    let args = json!({ "argv": argv }).to_string();
    let roomy = b.call(&request("roomy", 1, "exec", &args)).await;
    assert!(stdout_of(content(&roomy)).contains("all"), "{roomy:?}");
}

// Checked against a missing wall: with the call's and the grant's timeout_ms raised to 600000
// the run is stopped only near brokerd's call_timeout_ms, and the 10 s bound below fails.
#[tokio::test]
async fn sleep_600_is_reported_timed_out_and_leaves_no_process() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"programs": ["sleep"]}))],
    );
    // `sleep 600.<pid><nanos>`: 600 seconds, and an argument no other process holds.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let marker = format!("600.{}{nanos}", std::process::id());
    let started = Instant::now();
    let call = exec_args(&b, json!({"argv": ["sleep", marker], "timeout_ms": 1_000}));
    // While the call runs, the sleep is on the host's process table: the scan below sees it.
    let (r, seen) = tokio::join!(call, until_processes(&marker, |p| !p.is_empty()));
    assert!(seen, "the sleep never showed in /proc");
    assert!(
        content(&r).starts_with("status: timed out\n"),
        "{}",
        content(&r)
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        until_processes(&marker, <[u32]>::is_empty).await,
        "left running: {:?}",
        processes_with(&marker)
    );
}
