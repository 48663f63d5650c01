#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Budgets end to end (`docs/budgets.md`): the real fakellama, loopd and boxctl binaries. A
//! turn budget chosen per session by glob ends the turn `budget` and boxctl exits 7; the day
//! budget ends the turn that spends it and then refuses new tasks with 429 (kind `budget`).

use bxcore::{LogRecord, SessionId, TurnEnd};
use e2e::{Stack, StackOptions, show};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ends(stack: &Stack, id: &str) -> Vec<TurnEnd> {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    store
        .read(&SessionId::new(id).unwrap())
        .unwrap()
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::TurnEnd { end, .. } => Some(end),
            _ => None,
        })
        .collect()
}

/// boxctl's exit code for a budget (`boxctl --help`).
const EXIT_BUDGET: i32 = 7;

#[test]
fn a_sessions_turn_budget_from_its_glob_ends_the_turn_and_the_session_goes_on() {
    let stack = Stack::start(StackOptions {
        script: r#"default_reply = "All done."
[[rule]]
when_role = "user"
when_contains = "clocks"
tool_calls = [{ name = "clock", arguments = "{}" }, { name = "clock", arguments = "{\"again\":1}" }]
"#
        .into(),
        loopd_toml: "[[budgets.sessions]]\nmatch = \"limited-*\"\nmax_tool_calls_per_turn = 1\n"
            .into(),
        ..StackOptions::default()
    })
    .unwrap();
    let out = stack.boxctl(&["task", "--session", "limited-1", "read two clocks"]);
    assert_eq!(out.status.code(), Some(EXIT_BUDGET), "{}", show(&out));
    assert!(
        text(&out.stderr).contains(
            "boxctl: the turn stopped at a budget: the turn asked for tool call 2; \
             max_tool_calls_per_turn is 1"
        ),
        "{}",
        show(&out)
    );
    // A session the glob does not match has no budget.
    let out = stack.boxctl(&["task", "--session", "free", "read two clocks"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    // The limited session takes its next task.
    let out = stack.boxctl(&["task", "--session", "limited-1", "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let ended = ends(&stack, "limited-1");
    assert!(
        matches!(&ended[..], [TurnEnd::Budget { budget, .. }, TurnEnd::Done] if budget == "max_tool_calls_per_turn"),
        "{ended:?}"
    );
}

#[test]
fn the_day_budget_ends_the_turn_that_spends_it_then_refuses_new_tasks_with_429() {
    let stack = Stack::start(StackOptions {
        script: "default_reply = \"one two three four five six seven eight nine ten\"\n".into(),
        loopd_toml: "[budgets]\nmax_generated_tokens_per_day = 4\ntimezone = \"Asia/Tokyo\"\n"
            .into(),
        ..StackOptions::default()
    })
    .unwrap();
    let out = stack.boxctl(&["task", "--session", "a", "talk"]);
    assert_eq!(out.status.code(), Some(EXIT_BUDGET), "{}", show(&out));
    assert!(
        text(&out.stderr).contains(
            "boxctl: the turn stopped at a budget: 4 tokens were generated today (Asia/Tokyo) \
             by all sessions; max_generated_tokens_per_day is 4; the day turns at "
        ),
        "{}",
        show(&out)
    );
    // Every session's new task is refused now, until the next midnight in Tokyo.
    let out = stack.boxctl(&["--json", "task", "--session", "b", "talk"]);
    assert_eq!(out.status.code(), Some(EXIT_BUDGET), "{}", show(&out));
    let error: proto::api::ApiError = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(error.error.kind, proto::api::error_kind::BUDGET);
    let message = &error.error.message;
    assert!(
        message.starts_with(
            "the day's budget is spent: 4 tokens were generated today (Asia/Tokyo) by all \
             sessions; max_generated_tokens_per_day is 4; the day turns at "
        ) && message.contains("T00:00:00+09:00"),
        "{message}"
    );
    // The refusal is 429 on the wire.
    assert_eq!(
        status_of_task(&stack, r#"{"session":"c","text":"talk"}"#),
        "HTTP/1.1 429 Too Many Requests"
    );
    // Nothing was written for the refused tasks.
    assert!(!stack.dir.path().join("state/sessions/b").exists());
    assert!(!stack.dir.path().join("state/sessions/c").exists());
}

/// The status line of loopd's answer to `POST /v1/tasks` with `body`, over its socket.
fn status_of_task(stack: &Stack, body: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let mut socket = std::os::unix::net::UnixStream::connect(&stack.socket).unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    write!(
        socket,
        "POST /v1/tasks HTTP/1.1\r\nhost: loopd\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(socket).read_line(&mut line).unwrap();
    line.trim_end().to_string()
}
