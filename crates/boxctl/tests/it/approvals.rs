//! `boxctl approvals`, `approve` and `deny` against loopd's real API layer over the stub: what
//! they print, what they post (and with which uid), and their exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_stub::*;
use boxctl::approvals::{answered_line, approvals_table};
use boxctl::cli::{EXIT_NO_APPROVAL, EXIT_USAGE};
use bxcore::{ApprovalDecision, ApprovalId, CallId, Timestamp};
use proto::api::{ApprovalAnswered, ApprovalList, OwnerAnswer};
use std::process::{Command, Stdio};

#[tokio::test]
async fn boxctl_approvals_lists_the_waiting_calls_and_json_is_the_list() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["approvals"]).await;
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with("ID    SESSION  TOOL        AGE"),
        "{out}"
    );
    let row = lines[1];
    assert!(row.starts_with("ap-1  s1       write_file  "), "{out}");
    // Asked on 2026-01-02: days ago, in days.
    let age = row.split_whitespace().nth(3).unwrap();
    assert!(age.ends_with('d'), "{row}");
    assert!(
        row.contains("write_file asks the owner first (approve = always)"),
        "{row}"
    );
    assert!(
        row.ends_with(r#"{"path":"/srv/notes/a.txt","content":"hello"}"#),
        "{row}"
    );
    let (code, json, _) = boxctl(&served, &["approvals", "--json"]).await;
    assert_eq!(code, Some(0));
    // One line, compact, id before session: how scripts/demo.sh finds a session's approval.
    assert_eq!(json.lines().count(), 1, "{json}");
    assert!(json.contains(r#"{"id":"ap-1","session":"s1","#), "{json}");
    let list: ApprovalList = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(list.approvals, vec![stub_pending_approval()]);
    // Nothing was answered by listing.
    assert!(served.stub.answered.lock().unwrap().is_empty());
}

/// Issue 32: the owner decides on the arguments, so the table shows them whole (a path of 200
/// characters, not its first 60), last so that they push no column aside, with a bidi
/// override written out rather than reordering the line.
#[test]
fn approvals_table_says_when_none_wait_and_shows_arguments_whole_and_written_out() {
    let now = Timestamp::now();
    let empty = ApprovalList { approvals: vec![] };
    assert_eq!(
        approvals_table(&empty, &now),
        "no calls wait for approval\n"
    );
    let path = format!("/srv/{}/end", "d".repeat(191));
    assert_eq!(path.chars().count(), 200);
    let mut pending = stub_pending_approval();
    pending.arguments =
        format!("{{\"content\":\"x\\nrm -rf /\",\"path\":\"{path}\u{202e}txt.exe\"}}");
    pending.asked = now;
    let table = approvals_table(
        &ApprovalList {
            approvals: vec![pending],
        },
        &now,
    );
    let row = table.lines().nth(1).unwrap();
    assert!(
        row.ends_with(&format!(
            "{{\"content\":\"x\\nrm -rf /\",\"path\":\"{path}\\u{{202e}}txt.exe\"}}"
        )),
        "{row}"
    );
    assert!(!row.contains('\u{202e}'), "{row}");
    assert!(row.contains(" 0s "), "{row}");
    assert_eq!(table.lines().count(), 2, "one line each: {table}");
}

#[tokio::test]
async fn boxctl_approve_and_deny_post_the_answer_with_the_owners_uid() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["approve", "ap-1"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "approved ap-1 (session s1, call 4)\n");
    let (code, out, err) = boxctl(&served, &["approve", "ap-1", "--for-turn", "--json"]).await;
    assert_eq!(code, Some(0), "{err}");
    let answered: ApprovalAnswered = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(answered.decision, ApprovalDecision::ApprovedForTurn);
    assert_eq!(answered.call, CallId(4));
    let (code, out, err) = boxctl(&served, &["deny", "ap-1", "--reason", "not now"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "denied ap-1 (session s1, call 4)\n");
    let (code, out, _) = boxctl(&served, &["deny", "ap-1", "--json"]).await;
    assert_eq!(code, Some(0));
    let answered: ApprovalAnswered = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(answered.decision, ApprovalDecision::Denied);

    let answered = served.stub.answered.lock().unwrap().clone();
    let got: Vec<(OwnerAnswer, Option<&str>, Option<u32>)> = answered
        .iter()
        .map(|(a, uid)| (a.answer, a.reason.as_deref(), *uid))
        .collect();
    let uid = Some(own_uid());
    assert_eq!(
        got,
        [
            (OwnerAnswer::Approve, None, uid),
            (OwnerAnswer::ApproveForTurn, None, uid),
            (OwnerAnswer::Deny, Some("not now"), uid),
            (OwnerAnswer::Deny, None, uid),
        ]
    );
}

#[tokio::test]
async fn boxctl_answering_no_such_approval_exits_5_and_says_why() {
    let served = start();
    for args in [
        &["approve", "ap-2"][..],
        &["deny", "ap-2", "--reason", "no"],
    ] {
        let (code, out, err) = boxctl(&served, args).await;
        assert_eq!(code, Some(i32::from(EXIT_NO_APPROVAL)), "{args:?}: {err}");
        assert_eq!(out, "");
        assert!(
            err.starts_with(
                "boxctl: no such approval ap-2: answered, timed out, or never asked (no call \
                 waits for approval ap-2)"
            ),
            "{err}"
        );
    }
    // With --json, loopd's error body is on stdout for scripts.
    let (code, out, _) = boxctl(&served, &["approve", "ap-2", "--json"]).await;
    assert_eq!(code, Some(i32::from(EXIT_NO_APPROVAL)));
    let error: proto::api::ApiError = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(error.error.kind, proto::api::error_kind::NOT_FOUND);
    assert!(served.stub.answered.lock().unwrap().is_empty());
}

#[tokio::test]
async fn boxctl_a_bad_approval_id_or_a_long_reason_is_a_usage_error_and_nothing_is_sent() {
    let served = start();
    for (args, rule) in [
        (
            vec!["approve", "ap/1"],
            "only A-Z a-z 0-9 . _ - are allowed",
        ),
        (vec!["deny", ".ap"], "starts with '.'"),
        (vec!["approve", &"x".repeat(65)], "the limit is 64"),
    ] {
        let (code, _, err) = boxctl(&served, &args).await;
        assert_eq!(code, Some(i32::from(EXIT_USAGE)), "{args:?}");
        assert!(err.contains("invalid approval id"), "{err}");
        assert!(err.contains(rule), "{err}");
    }
    let long = "x".repeat(proto::api::MAX_DENY_REASON_BYTES + 1);
    let (code, _, err) = boxctl(&served, &["deny", "ap-1", "--reason", &long]).await;
    assert_eq!(code, Some(i32::from(EXIT_USAGE)));
    assert!(err.contains("the limit is 1000"), "{err}");
    assert!(served.stub.answered.lock().unwrap().is_empty());
}

#[test]
fn answered_lines_name_the_decision_session_and_call() {
    let answered = |decision| ApprovalAnswered {
        id: ApprovalId::new("ap-9").unwrap(),
        session: id("s2"),
        call: CallId(7),
        decision,
    };
    assert_eq!(
        answered_line(&answered(ApprovalDecision::ApprovedForTurn)),
        "approved for the rest of the turn ap-9 (session s2, call 7)"
    );
    assert_eq!(
        answered_line(&answered(ApprovalDecision::Denied)),
        "denied ap-9 (session s2, call 7)"
    );
}

#[tokio::test]
async fn boxctl_task_in_a_script_prints_the_request_and_asks_nothing() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["task", "--session", "ask-timeout", "save"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "→ write_file {\"path\":\"/srv/notes/a.txt\",\"content\":\"hello\"}\n\
         ? approval ap-1: write_file {\"path\":\"/srv/notes/a.txt\",\"content\":\"hello\"}\n\
         \x20 why: write_file asks the owner first (approve = always)\n\
         \x20 answer: boxctl approve ap-1 [--for-turn], or boxctl deny ap-1 [--reason TEXT]; \
         without an answer in 10m it is denied\n\
         = approval ap-1: timed out (no answer from the owner), the call does not run\n\
         ← denied: not_approved\n\
         The owner did not approve; nothing was saved.\n"
    );
    assert!(
        !err.contains("approve ap-1?"),
        "no question in a script: {err}"
    );
    assert!(served.stub.answered.lock().unwrap().is_empty());
}

/// The demo's flow: a task waits in the background; `boxctl approvals` shows it, `boxctl
/// approve` answers it, and the task goes on to its end.
#[tokio::test]
async fn boxctl_task_waits_until_another_boxctl_approves() {
    let served = start();
    let socket = served.socket.clone();
    let task = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_boxctl"))
            .env_clear()
            .env("BOXCTL_SOCKET", &socket)
            .args(["task", "--session", "ask", "save a note"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    });
    bounded(served.stub.asked.notified()).await;
    let (code, out, err) = boxctl(&served, &["approve", "ap-1"]).await;
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "approved ap-1 (session s1, call 4)\n"),
        "{err}"
    );
    let done = bounded(task).await.unwrap();
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert_eq!(done.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("? approval ap-1: write_file"), "{stdout}");
    assert!(
        stdout.ends_with("= approval ap-1: approved, the call runs\n← ok, 12 bytes\nSaved.\n"),
        "{stdout}"
    );
    assert_eq!(served.stub.answered.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn boxctl_show_follow_in_a_script_prints_a_request_and_its_decision_and_asks_nothing() {
    let served = start();
    let socket = served.socket.clone();
    let run = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_boxctl"))
            .env_clear()
            .env("BOXCTL_SOCKET", &socket)
            .args(["show", "s1", "--follow"])
            .output()
            .unwrap()
    });
    bounded(served.stub.followed.notified()).await;
    let sender = served.stub.follow.lock().unwrap().take().unwrap();
    let turn = asked_turn_start(&id("s1"))
        .into_iter()
        .chain(asked_turn_rest(ApprovalDecision::Void));
    for event in turn {
        sender.send(event).unwrap();
    }
    drop(sender);
    let out = bounded(run).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("── turn 3\n→ write_file {\"path\":\"/srv/notes/a.txt\",\"content\":\"hello\"}\n? approval ap-1: write_file"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "= approval ap-1: void (the wait ended without an answer), the call does not run\n"
        ),
        "{stdout}"
    );
    assert!(!stderr.contains("approve ap-1?"), "{stderr}");
    assert!(served.stub.answered.lock().unwrap().is_empty());
}
