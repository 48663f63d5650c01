#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Turns end to end: the real fakellama and loopd binaries, driven with the real boxctl.

use bxcore::{LogRecord, SessionId, ToolOutcome, TurnEnd, TurnEvent};
use e2e::{Stack, StackOptions};
use std::process::Output;

fn stack(script: &str) -> Stack {
    Stack::start(StackOptions {
        script: script.to_string(),
        ..StackOptions::default()
    })
    .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn show(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        text(&out.stdout),
        text(&out.stderr)
    )
}

/// The session's records, read and verified with loopd's own store.
fn records(stack: &Stack, id: &str) -> Vec<LogRecord> {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    store.read(&SessionId::new(id).unwrap()).unwrap()
}

fn ends(records: &[LogRecord]) -> Vec<TurnEnd> {
    records
        .iter()
        .filter_map(|r| match r {
            LogRecord::TurnEnd { end, .. } => Some(end.clone()),
            _ => None,
        })
        .collect()
}

fn events(out: &Output) -> Vec<TurnEvent> {
    text(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn a_plain_answer_streams_and_is_logged() {
    let stack = stack("default_reply = \"Hello from the model.\"\n");
    let out = stack.boxctl(&["task", "--session", "plain", "hi", "there"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        text(&out.stdout).contains("Hello from the model."),
        "{}",
        show(&out)
    );
    let records = records(&stack, "plain");
    assert!(
        matches!(&records[1], LogRecord::User { content, turn: 1, .. } if content == "hi there")
    );
    assert!(
        matches!(&records[3], LogRecord::Assistant { content, .. } if content == "Hello from the model.")
    );
    assert_eq!(ends(&records), vec![TurnEnd::Done]);
}

const TOOLS_SCRIPT: &str = r#"
[[rule]]
when_role = "user"
times = 1
tool_calls = [{ name = "clock", arguments = "{}" }, { name = "find_tool", arguments = "{\"query\":\"echo\"}" }]

[[rule]]
when_role = "tool"
when_contains = "tool(s) match"
times = 1
tool_calls = [{ name = "call_tool", arguments = "{\"name\":\"echo\",\"arguments\":{\"text\":\"ping\"}}" }]

[[rule]]
when_role = "tool"
when_contains = "ping"
reply = "The echo said ping."
"#;

#[test]
fn a_multi_step_turn_runs_clock_find_tool_and_call_tool() {
    let stack = stack(TOOLS_SCRIPT);
    let out = stack.boxctl(&["--json", "task", "--session", "tools", "use your tools"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let events = events(&out);
    let called: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolCall { tool_call, .. } => Some(tool_call.name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(called, ["clock", "find_tool", "call_tool"]);
    assert!(matches!(
        events.last(),
        Some(TurnEvent::Ended {
            end: TurnEnd::Done,
            ..
        })
    ));

    let records = records(&stack, "tools");
    let results: Vec<(&str, ToolOutcome)> = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult {
                content, outcome, ..
            } => Some((content.as_str(), *outcome)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        bxcore::Timestamp::parse(results[0].0).is_ok(),
        "{results:?}"
    );
    assert!(results[1].0.starts_with("1 tool(s) match:"), "{results:?}");
    assert_eq!(results[2], ("ping", ToolOutcome::Ok));
    assert!(records.iter().any(
        |r| matches!(r, LogRecord::Assistant { content, .. } if content == "The echo said ping.")
    ));
}

#[test]
fn invalid_tool_calls_get_a_clear_answer_and_the_turn_goes_on() {
    let script = r#"
[[rule]]
when_role = "user"
times = 1
tool_calls = [{ name = "clock", arguments = "{not json" }, { name = "echo", arguments = "{\"text\":\"x\"}" }]

[[rule]]
when_role = "tool"
reply = "Understood."
"#;
    let stack = stack(script);
    let out = stack.boxctl(&["task", "--session", "bad", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let records = records(&stack, "bad");
    let answers: Vec<&str> = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert!(answers[0].contains("not valid JSON"), "{answers:?}");
    assert!(
        answers[1].contains("no tool named \"echo\" in your tools array"),
        "{answers:?}"
    );
    assert!(answers[1].contains("call_tool"), "{answers:?}");
    assert_eq!(ends(&records), vec![TurnEnd::Done]);
}

#[test]
fn a_model_server_answering_503_is_retried_until_it_recovers() {
    let script = r#"
default_reply = "Back again."
[[rule]]
times = 2
error = { status = 503, type = "unavailable_error", message = "Loading model" }
"#;
    let stack = stack(script);
    let out = stack.boxctl(&["--json", "task", "--session", "retry", "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let retries = events(&out)
        .into_iter()
        .filter(|e| matches!(e, TurnEvent::Retry { .. }))
        .count();
    assert_eq!(retries, 2);
    assert_eq!(ends(&records(&stack, "retry")), vec![TurnEnd::Done]);
}

#[test]
fn a_model_server_that_is_gone_fails_the_turn_cleanly() {
    let mut stack = stack("default_reply = \"first\"\n");
    let out = stack.boxctl(&["task", "--session", "gone", "one"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    drop(stack.model.take());
    let out = stack.boxctl(&["task", "--session", "gone", "two"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let records = records(&stack, "gone");
    let ends = ends(&records);
    assert_eq!(ends[0], TurnEnd::Done);
    assert!(
        matches!(&ends[1], TurnEnd::Failed { reason } if reason.contains("127.0.0.1")),
        "{ends:?}"
    );
    // loopd is still serving, and the log is intact.
    let out = stack.boxctl(&["sessions"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}
