#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Tasks named by their client (issue 13): a task submitted again under the same `task_id`
//! runs once and the second submission is answered with the first one's turn: live while it
//! waits or runs, from the session log once it ended, and after loopd restarts too.

use bxcore::{LogRecord, SessionId, TaskId, TurnEnd, TurnEvent};
use e2e::{Stack, StackOptions, show};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

/// "slow" tasks wait 2 s for their answer: long enough for a second submission to find them
/// still waiting or running.
const SCRIPT: &str = r#"
default_reply = "Hello again."
[[rule]]
when_contains = "slow"
delay_ms = 2000
reply = "Slowly done."
"#;
/// The longest a test waits for a state it expects, in milliseconds.
const WAIT_MS: u64 = 20_000;

fn stack() -> Stack {
    Stack::start(StackOptions {
        script: SCRIPT.to_string(),
        ..StackOptions::default()
    })
    .unwrap()
}

fn task_args<'a>(session: Option<&'a str>, task_id: &'a str, text: &'a str) -> Vec<&'a str> {
    let mut args = vec!["--json", "task", "--task-id", task_id];
    if let Some(session) = session {
        args.extend(["--session", session]);
    }
    args.push(text);
    args
}

fn spawn_task(stack: &Stack, session: &str, task_id: &str, text: &str) -> Child {
    stack.spawn_boxctl(&task_args(Some(session), task_id, text))
}

/// The turn events of a `boxctl --json task` that ended `done`.
fn done_events(out: &Output) -> Vec<TurnEvent> {
    assert_eq!(out.status.code(), Some(0), "{}", show(out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// `Started` and `Ended` of `events`, which must be the first and the last.
fn ends(events: &[TurnEvent]) -> (TurnEvent, TurnEnd, u64) {
    let Some(TurnEvent::Ended { turn, end, .. }) = events.last() else {
        panic!("{events:?}")
    };
    (events[0].clone(), end.clone(), *turn)
}

/// The answer's text in `events`.
fn content(events: &[TurnEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Content { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn started(session: &str, turn: u64) -> TurnEvent {
    TurnEvent::Started {
        session: SessionId::new(session).unwrap(),
        turn,
    }
}

/// The user records of session `id`: turn, text and task id.
fn users(stack: &Stack, id: &str) -> Vec<(u64, String, Option<TaskId>)> {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    store
        .read(&SessionId::new(id).unwrap())
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::User {
                turn,
                content,
                task_id,
                ..
            } => Some((turn, content, task_id)),
            _ => None,
        })
        .collect()
}

fn named(id: &str) -> Option<TaskId> {
    Some(TaskId::new(id).unwrap())
}

/// `POST /v1/tasks` with `body` and no event stream: the status line and the JSON answer.
fn post_task(stack: &Stack, body: &str) -> (String, serde_json::Value) {
    let mut stream = UnixStream::connect(&stack.socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(WAIT_MS)))
        .unwrap();
    write!(
        stream,
        "POST /v1/tasks HTTP/1.1\r\nhost: loopd\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, json) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.lines().next().unwrap().to_string();
    (status, serde_json::from_str(json).unwrap())
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
        assert!(Instant::now() < deadline, "{session} never busy: {list}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_task_id_submitted_again_runs_once_and_answers_the_first_turn_also_after_a_restart() {
    let mut stack = stack();
    let first = done_events(&stack.boxctl(&task_args(Some("s"), "ask-1", "hello")));
    assert_eq!(content(&first), "Hello again.");
    let again = done_events(&stack.boxctl(&task_args(Some("s"), "ask-1", "hello")));
    assert_eq!(again.len(), 2, "only its start and end: {again:?}");
    assert_eq!(ends(&again), (started("s", 1), TurnEnd::Done, 1));
    assert_eq!(users(&stack, "s"), [(1, "hello".into(), named("ask-1"))]);
    // Without an event stream: the turn and its end.
    let (status, answer) = post_task(
        &stack,
        r#"{"session":"s","text":"hello","task_id":"ask-1"}"#,
    );
    assert_eq!(status, "HTTP/1.1 202 Accepted");
    assert_eq!(
        answer,
        serde_json::json!({"session": "s", "turn": 1, "end": "done"})
    );

    // A task without a session runs in task-<id>, where a second submission finds it.
    let solo = done_events(&stack.boxctl(&task_args(None, "solo", "hi")));
    assert_eq!(ends(&solo), (started("task-solo", 1), TurnEnd::Done, 1));
    let solo_again = done_events(&stack.boxctl(&task_args(None, "solo", "hi")));
    assert_eq!(solo_again.len(), 2, "{solo_again:?}");

    // loopd killed and started again: the ids are in the logs.
    drop(stack.loopd.take());
    stack.start_loopd("").unwrap();
    let after = done_events(&stack.boxctl(&task_args(Some("s"), "ask-1", "hello")));
    assert_eq!(after, again);
    let solo_after = done_events(&stack.boxctl(&task_args(None, "solo", "hi")));
    assert_eq!(
        ends(&solo_after),
        (started("task-solo", 1), TurnEnd::Done, 1)
    );
    assert_eq!(users(&stack, "s"), [(1, "hello".into(), named("ask-1"))]);
    assert_eq!(
        users(&stack, "task-solo"),
        [(1, "hi".into(), named("solo"))]
    );

    // Another id is another task.
    let other = done_events(&stack.boxctl(&task_args(Some("s"), "ask-2", "hello")));
    assert_eq!(ends(&other), (started("s", 2), TurnEnd::Done, 2));
}

#[test]
fn a_task_id_submitted_again_while_the_first_waits_or_runs_follows_it() {
    let stack = stack();
    let running = spawn_task(&stack, "s", "run", "slow first");
    wait_until_busy(&stack, "s", 0);
    let waiting = spawn_task(&stack, "s", "wait", "slow second");
    wait_until_busy(&stack, "s", 1);
    let running_again = spawn_task(&stack, "s", "run", "slow first");
    let waiting_again = spawn_task(&stack, "s", "wait", "slow second");

    let outputs: Vec<Vec<TurnEvent>> = [running, running_again, waiting, waiting_again]
        .into_iter()
        .map(|task| done_events(&task.wait_with_output().unwrap()))
        .collect();
    for (events, turn) in outputs.iter().zip([1, 1, 2, 2]) {
        assert_eq!(ends(events), (started("s", turn), TurnEnd::Done, turn));
        // Each one followed the turn live: it saw the answer stream.
        assert_eq!(content(events), "Slowly done.", "{events:?}");
    }
    assert_eq!(
        users(&stack, "s"),
        [
            (1, "slow first".into(), named("run")),
            (2, "slow second".into(), named("wait")),
        ]
    );
}
