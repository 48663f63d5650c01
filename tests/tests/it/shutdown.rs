#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Shutdown end to end (issue 13): on SIGTERM loopd stops taking tasks, tells running turns to
//! stop, lets each record its end and send its `ended` event, answers the tasks still waiting
//! with 503, and only then closes its event streams and socket.

use bxcore::{LogRecord, SessionId, TurnEnd, TurnEvent};
use e2e::{Stack, StackOptions, show};
use std::process::{Child, Command, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A model that takes 1.3 s to answer a task that says "slow": long enough for the test to
/// queue tasks behind it and send SIGTERM, short enough that, were the turn not told to stop,
/// it would end and the next task start within loopd's 2 s drain of open connections.
const SLOW_SCRIPT: &str = r#"
[[rule]]
when_contains = "slow"
delay_ms = 1300
reply = "Done at last."
"#;

/// The longest a test waits for a state or a process it expects.
const WAIT_MS: u64 = 20_000;

fn spawn_task(stack: &Stack, session: &str, text: &str) -> Child {
    stack.spawn_boxctl(&["--json", "task", "--session", session, text])
}

/// `child`'s output once it exits; fails the test when that takes longer than [`WAIT_MS`].
fn output_within_bound(child: Child) -> Output {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    rx.recv_timeout(Duration::from_millis(WAIT_MS))
        .expect("a boxctl did not exit in time")
        .unwrap()
}

/// Waits (bounded) until `ready` holds for loopd's `--json` answer to `args`.
fn wait_for(stack: &Stack, args: &[&str], ready: impl Fn(&serde_json::Value) -> bool) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    loop {
        let out = stack.boxctl(args);
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if ready(&answer) {
            return;
        }
        assert!(Instant::now() < deadline, "never ready: {answer}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn queued_on(session: &str, queued: u64) -> impl Fn(&serde_json::Value) -> bool {
    move |list| {
        list["sessions"].as_array().into_iter().flatten().any(|s| {
            s["id"] == session && s["busy"] == true && s["queued"].as_u64() == Some(queued)
        })
    }
}

/// The turn events `boxctl --json task` printed, one a line.
fn events(out: &Output) -> Vec<TurnEvent> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn sigterm_ends_running_turns_in_their_streams_and_answers_waiting_tasks_503() {
    let mut stack = Stack::start(StackOptions {
        script: SLOW_SCRIPT.to_string(),
        ..StackOptions::default()
    })
    .unwrap();
    let running = spawn_task(&stack, "s1", "be slow");
    wait_for(&stack, &["--json", "sessions"], queued_on("s1", 0));
    let mut waiting: Vec<Child> = (1..=2)
        .map(|n| spawn_task(&stack, "s1", &format!("queued {n}")))
        .collect();
    wait_for(&stack, &["--json", "sessions"], queued_on("s1", 2));
    // A task of another session: its lane waits for the one main slot.
    waiting.push(spawn_task(&stack, "s2", "be slow too"));
    wait_for(&stack, &["--json", "status"], |status| {
        status["loopd"]["running"] == 2
    });

    let loopd = stack.loopd.as_ref().unwrap().id();
    let kill = Command::new("kill")
        .args(["-TERM", &loopd.to_string()])
        .status()
        .unwrap();
    assert!(kill.success());

    // The streaming client sees its turn end, interrupted, before the stream ends.
    let out = output_within_bound(running);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let events = events(&out);
    assert!(
        matches!(
            events.last(),
            Some(TurnEvent::Ended {
                end: TurnEnd::Interrupted,
                ..
            })
        ),
        "{}",
        show(&out)
    );
    // Each client waiting for an acknowledgement gets a 503 with the API's error body.
    for task in waiting {
        let out = output_within_bound(task);
        assert_eq!(out.status.code(), Some(1), "{}", show(&out));
        let error: proto::api::ApiError =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
        assert_eq!(error.error.code, 503, "{}", show(&out));
        assert_eq!(error.error.kind, "unavailable");
        assert!(
            error.error.message.contains("shutting down"),
            "{}",
            show(&out)
        );
    }
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    let status = loop {
        if let Some(status) = stack.loopd.as_mut().unwrap().exited() {
            break status;
        }
        assert!(Instant::now() < deadline, "loopd did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");

    // No user record was written after SIGTERM: s1 holds its one turn, ended as interrupted,
    // and s2 was never begun.
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let records = store.read(&SessionId::new("s1").unwrap()).unwrap();
    let users = records
        .iter()
        .filter(|r| matches!(r, LogRecord::User { .. }))
        .count();
    assert_eq!(users, 1, "{records:?}");
    assert!(
        matches!(
            records.last(),
            Some(LogRecord::TurnEnd {
                end: TurnEnd::Interrupted,
                ..
            })
        ),
        "{records:?}"
    );
    assert!(!store.exists(&SessionId::new("s2").unwrap()));
}
