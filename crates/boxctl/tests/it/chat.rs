//! `boxctl chat` and `boxctl task -` against loopd's real API layer over the stub, stdin a
//! pipe: the lines are messages and answers, in order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_stub::*;
use boxctl::cli::{Command, EXIT_USAGE};
use boxctl::run::{ChatLine, MAX_STDIN_TASK_BYTES, StdinTextError, chat_line, read_task_text};
use clap::Parser;
use proto::api::OwnerAnswer;

/// The texts and sessions of the tasks the stub got.
fn submitted(served: &Served) -> Vec<(Option<String>, String)> {
    let tasks = served.stub.submitted.lock().unwrap();
    tasks
        .iter()
        .map(|t| (t.session.as_ref().map(|s| s.to_string()), t.text.clone()))
        .collect()
}

#[test]
fn stdin_text_is_bounded_utf8_and_not_empty() {
    assert_eq!(
        read_task_text(&b"what time is it?\n"[..], 100).unwrap(),
        "what time is it?"
    );
    assert_eq!(
        read_task_text(&b"two\nlines\n\n"[..], 100).unwrap(),
        "two\nlines"
    );
    assert_eq!(
        read_task_text(&b" \n\t\n"[..], 100),
        Err(StdinTextError::Empty)
    );
    assert_eq!(read_task_text(&b""[..], 100), Err(StdinTextError::Empty));
    assert_eq!(read_task_text(&[b'x'; 100][..], 100).unwrap().len(), 100);
    assert_eq!(
        read_task_text(&[b'x'; 101][..], 100),
        Err(StdinTextError::TooLong { limit_bytes: 100 })
    );
    assert_eq!(
        read_task_text(&b"ok \xff"[..], 100),
        Err(StdinTextError::NotUtf8 { at_byte: 3 })
    );
}

#[test]
fn chat_lines_quit_skip_send_or_are_too_long() {
    assert_eq!(chat_line("/quit", 10), ChatLine::Quit);
    assert_eq!(chat_line("  /quit \r", 10), ChatLine::Quit);
    assert_eq!(chat_line("   ", 10), ChatLine::Skip);
    assert_eq!(
        chat_line(" hi there \r", 10),
        ChatLine::Send("hi there".into())
    );
    assert_eq!(
        chat_line("x".repeat(11).as_str(), 10),
        ChatLine::TooLong(11)
    );
}

#[test]
fn chat_parses_a_session_and_reasoning() {
    let cli =
        boxctl::Cli::try_parse_from(["boxctl", "chat", "--session", "s1", "--reasoning"]).unwrap();
    let Command::Chat { session, reasoning } = cli.command else {
        panic!("not chat: {:?}", cli.command)
    };
    assert_eq!((session.unwrap().as_str(), reasoning), ("s1", true));
    assert!(boxctl::Cli::try_parse_from(["boxctl", "chat", "extra"]).is_err());
}

#[tokio::test]
async fn task_dash_reads_the_text_from_stdin() {
    let served = start();
    let stdin = "what time\nis it?\n".as_bytes();
    let (code, out, err) = boxctl_fed(&served, &["task", "--session", "s1", "-"], stdin).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("It is noon."), "{out}");
    assert_eq!(
        submitted(&served),
        [(Some("s1".into()), "what time\nis it?".into())]
    );
    // `-` among other words is a word.
    let (code, _, err) = boxctl_fed(&served, &["task", "--session", "s1", "a", "-"], b"x").await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(submitted(&served)[1].1, "a -");
}

#[tokio::test]
async fn task_dash_refuses_empty_too_long_and_not_utf8_stdin_with_exit_64() {
    let served = start();
    let long = vec![b'x'; MAX_STDIN_TASK_BYTES + 1];
    for (stdin, why) in [
        (&b" \n"[..], "the task text on stdin is empty".to_string()),
        (
            &long[..],
            format!("the task text on stdin is longer than {MAX_STDIN_TASK_BYTES} bytes"),
        ),
        (
            &b"caf\xe9\n"[..],
            "the task text on stdin is not UTF-8 (from byte 3)".into(),
        ),
    ] {
        let (code, out, err) = boxctl_fed(&served, &["task", "-"], stdin).await;
        assert_eq!(code, Some(i32::from(EXIT_USAGE)), "{err}");
        assert!(err.starts_with(&format!("boxctl: {why}")), "{err}");
        assert!(out.is_empty(), "{out}");
    }
    assert!(submitted(&served).is_empty(), "nothing was sent");
}

#[tokio::test]
async fn chat_sends_each_line_in_one_session_and_ends_at_eof_or_quit() {
    let served = start();
    let stdin = b"hello\n\nwhat time is it?\n/quit\nnot sent\n";
    let (code, out, err) = boxctl_fed(&served, &["chat"], stdin).await;
    assert_eq!(code, Some(0), "{err}");
    // Both answers streamed, as `boxctl task` streams them.
    assert_eq!(out.matches("It is noon.").count(), 2, "{out}");
    assert_eq!(out.matches("clock").count(), 2, "{out}");
    // The first went to a new session; the second to the session it got.
    assert_eq!(
        submitted(&served),
        [
            (None, "hello".into()),
            (Some("new-1".into()), "what time is it?".into())
        ]
    );
    assert_eq!(
        err.matches("boxctl: session new-1, turn 2").count(),
        1,
        "{err}"
    );
    // A named session, ended by the end of stdin; --json streams the events.
    let (code, out, err) = boxctl_fed(&served, &["chat", "--session", "s1", "--json"], b"hi").await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.lines().all(|l| l.starts_with('{')), "{out}");
    assert_eq!(submitted(&served)[2], (Some("s1".into()), "hi".into()));
}

#[tokio::test]
async fn chat_asks_approvals_inline_and_the_next_line_answers() {
    let served = start();
    let stdin = b"save it\ny\n";
    let (code, out, err) = boxctl_fed(&served, &["chat", "--session", "ask"], stdin).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("approve ap-1? [y/N] "), "{err}");
    assert!(out.contains("Saved."), "{out}");
    let answered = served.stub.answered.lock().unwrap().clone();
    assert_eq!(answered.len(), 1, "{answered:?}");
    assert_eq!(answered[0].0.answer, OwnerAnswer::Approve);
    // Only one task was sent: `y` was the answer, not a message.
    assert_eq!(submitted(&served).len(), 1);

    // Anything else denies, and the chat goes on to the next message, asked again.
    let stdin = b"save it\nno\nsave it again\nyes\n";
    let (code, out, err) = boxctl_fed(&served, &["chat", "--session", "ask"], stdin).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("nothing was saved"), "{out}");
    assert!(out.contains("Saved."), "{out}");
    let answered = served.stub.answered.lock().unwrap().clone();
    let answers: Vec<OwnerAnswer> = answered.iter().map(|(a, _)| a.answer).collect();
    assert_eq!(
        answers,
        [
            OwnerAnswer::Approve,
            OwnerAnswer::Deny,
            OwnerAnswer::Approve
        ]
    );
    let texts: Vec<String> = submitted(&served).into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts, ["save it", "save it", "save it again"]);
}

#[tokio::test]
async fn chat_goes_on_after_a_refusal_and_ends_on_an_unknown_session() {
    let served = start();
    let (code, out, err) = boxctl_fed(&served, &["chat", "--session", "busy"], b"a\nb\n").await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        err.matches("session busy has 8 tasks waiting").count(),
        2,
        "{err}"
    );
    assert!(out.is_empty(), "{out}");
    let (code, _, err) = boxctl_fed(&served, &["chat", "--session", "nope"], b"a\nb\n").await;
    assert_eq!(code, Some(4), "{err}");
    assert_eq!(
        submitted(&served).len(),
        3,
        "the chat stopped at the first 404"
    );
}
