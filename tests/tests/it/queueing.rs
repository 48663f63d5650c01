#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Cancel, per-session queues and many sessions at once, end to end.

use bxcore::{LogRecord, SessionId, TurnEnd};
use e2e::real::heavy;
use e2e::{Stack, StackOptions, show};
use std::process::Child;
use std::time::{Duration, Instant};

/// A reply long enough to stream for a while at the delay below.
const SLOW_SCRIPT: &str = r#"
[[rule]]
when_contains = "slow"
reply = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"
"#;

/// Per streamed chunk, in milliseconds.
const CHUNK_DELAY_MS: &str = "40";
/// The longest a test waits for a state it expects.
const WAIT_MS: u64 = 20_000;

fn slow_stack(loopd_toml: &str) -> Stack {
    Stack::start(StackOptions {
        script: SLOW_SCRIPT.to_string(),
        loopd_toml: loopd_toml.to_string(),
        fakellama_args: vec!["--delay-ms".into(), CHUNK_DELAY_MS.into()],
        ..StackOptions::default()
    })
    .unwrap()
}

fn spawn_task(stack: &Stack, session: &str, text: &str) -> Child {
    stack.spawn_boxctl(&["task", "--session", session, text])
}

/// Waits (bounded) until loopd lists `session` with a running turn and `queued` waiting.
fn wait_until_busy(stack: &Stack, session: &str, queued: u64) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    loop {
        let out = stack.boxctl(&["--json", "sessions"]);
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let busy = list["sessions"].as_array().into_iter().flatten().any(|s| {
            s["id"] == session && s["busy"] == true && s["queued"].as_u64() == Some(queued)
        });
        if busy {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{session} never became busy: {list}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn records(stack: &Stack, id: &str) -> Vec<LogRecord> {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    store.read(&SessionId::new(id).unwrap()).unwrap()
}

#[test]
fn cancel_stops_a_running_turn() {
    let stack = slow_stack("");
    let task = spawn_task(&stack, "slow", "be slow");
    wait_until_busy(&stack, "slow", 0);
    let out = stack.boxctl(&["cancel", "slow"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let out = task.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let records = records(&stack, "slow");
    assert!(
        matches!(
            records.last(),
            Some(LogRecord::TurnEnd {
                end: TurnEnd::Cancelled,
                ..
            })
        ),
        "{records:?}"
    );
}

#[test]
fn two_tasks_on_one_session_run_in_order() {
    let stack = slow_stack("");
    let first = spawn_task(&stack, "q", "slow first");
    wait_until_busy(&stack, "q", 0);
    let second = spawn_task(&stack, "q", "then second");
    wait_until_busy(&stack, "q", 1);
    for task in [first, second] {
        let out = task.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }
    let users: Vec<(u64, String)> = records(&stack, "q")
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::User { turn, content, .. } => Some((turn, content)),
            _ => None,
        })
        .collect();
    assert_eq!(users, [(1, "slow first".into()), (2, "then second".into())]);
}

#[test]
fn a_full_queue_is_refused_as_busy() {
    let stack = slow_stack("[api]\nsession_queue_len = 0\n");
    let first = spawn_task(&stack, "full", "slow");
    wait_until_busy(&stack, "full", 0);
    let out = stack.boxctl(&["task", "--session", "full", "another"]);
    assert_eq!(out.status.code(), Some(3), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("busy"),
        "{}",
        show(&out)
    );
    assert_eq!(first.wait_with_output().unwrap().status.code(), Some(0));
}

#[test]
fn tasks_waiting_across_sessions_are_capped_and_the_places_come_back() {
    let stack = slow_stack("[api]\nmax_waiting_tasks = 1\n");
    let first = spawn_task(&stack, "a", "slow");
    wait_until_busy(&stack, "a", 0);
    // The one place: a task waiting behind the running one.
    let second = spawn_task(&stack, "a", "then second");
    wait_until_busy(&stack, "a", 1);
    // Another session's task would wait too: refused, whatever session it names.
    let out = stack.boxctl(&["task", "--session", "c", "third"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("max_waiting_tasks"), "{}", show(&out));
    assert_eq!(first.wait_with_output().unwrap().status.code(), Some(0));
    assert_eq!(second.wait_with_output().unwrap().status.code(), Some(0));
    // Started tasks gave their places back.
    let out = stack.boxctl(&["task", "--session", "c", "third again"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// A number field of process `pid`'s `/proc/<pid>/status` (`Threads`, `VmRSS` in KiB).
fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap()
        .trim()
        .trim_end_matches(" kB")
        .parse()
        .unwrap()
}

#[test]
fn many_sessions_at_once_take_no_thread_each() {
    let _heavy = heavy();
    // E2E_MANY_SESSIONS=200 for the figure in docs/PERFORMANCE.md.
    let sessions: u64 = std::env::var("E2E_MANY_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(40);
    let stack = Stack::start(StackOptions {
        script: "default_reply = \"fine\"\n[[rule]]\nwhen_contains = \"hold\"\ndelay_ms = 3000\nreply = \"held\"\n"
            .into(),
        ..StackOptions::default()
    })
    .unwrap();
    let pid = stack.loopd.as_ref().unwrap().pid();
    let mut tasks = vec![spawn_task(&stack, "holder", "hold the slot")];
    wait_until_busy(&stack, "holder", 0);
    tasks.extend((1..sessions).map(|n| spawn_task(&stack, &format!("wait-{n}"), "hello")));
    // Every session has its lane started: the holder's turn runs, the others wait for it.
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    loop {
        let out = stack.boxctl(&["--json", "status"]);
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if status["loopd"]["running"].as_u64() == Some(sessions) {
            break;
        }
        assert!(Instant::now() < deadline, "never all waiting: {status}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (peak, rss_kib) = (proc_status(pid, "Threads"), proc_status(pid, "VmRSS"));
    println!("{sessions} sessions at once: loopd has {peak} threads, {rss_kib} KiB resident");
    assert!(
        peak < sessions,
        "loopd runs {peak} threads for {sessions} sessions at once"
    );
    for task in tasks {
        let out = task.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }
}

#[test]
fn fifty_sessions_at_once() {
    const SESSIONS: usize = 50;
    let _heavy = heavy();
    let stack = Stack::start(StackOptions {
        script: "default_reply = \"fine\"\n".into(),
        ..StackOptions::default()
    })
    .unwrap();
    let tasks: Vec<Child> = (0..SESSIONS)
        .map(|n| spawn_task(&stack, &format!("many-{n}"), "hello"))
        .collect();
    for task in tasks {
        let out = task.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }
    let out = stack.boxctl(&["--json", "sessions"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["sessions"].as_array().unwrap().len(), SESSIONS);
    for n in 0..SESSIONS {
        let records = records(&stack, &format!("many-{n}"));
        assert!(matches!(
            records.last(),
            Some(LogRecord::TurnEnd {
                end: TurnEnd::Done,
                ..
            })
        ));
    }
}
