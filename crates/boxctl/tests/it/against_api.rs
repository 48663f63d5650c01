//! The boxctl binary against loopd's real API layer (`loopd::api::serve`) with a scripted
//! stand-in engine: what each command prints and its exit code. The end-to-end tests with
//! the real engine and fakellama live in the workspace's `tests/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_stub;

use api_stub::*;
use bxcore::{TurnEnd, TurnEvent};
use proto::api::{RecordsPage, Status};
use std::process::Command;

#[tokio::test]
async fn boxctl_task_streams_the_answer_with_tool_lines_and_exits_0() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["task", "--session", "s1", "what", "time?"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "Let me check.\n→ clock {}\n← ok, 5 bytes\nIt is noon.\n"
    );
    assert_eq!(err, "");
}

#[tokio::test]
async fn boxctl_task_in_a_new_session_names_it_on_stderr() {
    let served = start();
    let (code, _, err) = boxctl(&served, &["task", "hello"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(err, "boxctl: session new-1, turn 2\n");
}

#[tokio::test]
async fn boxctl_task_json_prints_each_event_as_a_json_line() {
    let served = start();
    let (code, out, _) = boxctl(&served, &["--json", "task", "--session", "s1", "hi"]).await;
    assert_eq!(code, Some(0));
    let events: Vec<TurnEvent> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events, turn(&id("s1"), TurnEnd::Done));
}

#[tokio::test]
async fn boxctl_task_that_fails_exits_1_with_the_reason() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["task", "--session", "fail", "hi"]).await;
    assert_eq!(code, Some(1));
    assert!(out.ends_with("It is noon.\n"), "{out}");
    assert_eq!(err, "boxctl: the turn failed: llama-server is gone\n");
}

#[tokio::test]
async fn boxctl_task_stopped_at_a_budget_or_refused_by_the_day_budget_exits_7() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["task", "--session", "budget", "hi"]).await;
    assert_eq!(code, Some(7), "{err}");
    assert!(out.ends_with("It is noon.\n"), "{out}");
    assert_eq!(
        err,
        "boxctl: the turn stopped at a budget: the turn asked for tool call 41; \
         max_tool_calls_per_turn is 40\n"
    );
    let (code, out, err) = boxctl(&served, &["task", "--session", "spent", "hi"]).await;
    assert_eq!(code, Some(7));
    assert_eq!(out, "");
    assert_eq!(err, format!("boxctl: {SPENT}\n"));
    let (code, out, _) = boxctl(&served, &["--json", "task", "--session", "spent", "hi"]).await;
    assert_eq!(code, Some(7));
    let error: proto::api::ApiError = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(error.error.kind, proto::api::error_kind::BUDGET);
    assert_eq!(error.error.message, SPENT);
}

#[tokio::test]
async fn boxctl_busy_exits_3_and_unknown_session_exits_4() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["task", "--session", "busy", "hi"]).await;
    assert_eq!(code, Some(3));
    assert_eq!(out, "");
    assert_eq!(err, "boxctl: session busy has 8 tasks waiting\n");
    let (code, out, _) = boxctl(&served, &["--json", "task", "--session", "busy", "hi"]).await;
    assert_eq!(code, Some(3));
    let error: proto::api::ApiError = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(error.error.kind, proto::api::error_kind::BUSY);
    for args in [
        &["task", "--session", "nope", "hi"][..],
        &["show", "nope"],
        &["show", "nope", "--follow"],
    ] {
        let (code, _, err) = boxctl(&served, args).await;
        assert_eq!(code, Some(4), "{args:?}");
        assert_eq!(err, "boxctl: no session nope\n");
    }
}

#[tokio::test]
async fn boxctl_show_pages_through_every_record() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["show", "s1"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "03:04:05 user [turn 1]: what time is it?\n\
         03:04:05 → clock {}\n\
         03:04:05 ← ok, 5 bytes (call 1): 12:00\n\
         03:04:05 assistant: It is noon.\n\
         03:04:05 turn 1 ended: done\n"
    );
    let (_, json, _) = boxctl(&served, &["show", "s1", "--json"]).await;
    let pages: Vec<RecordsPage> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(pages.iter().map(|p| p.from).collect::<Vec<_>>(), [0, 2, 4]);
}

#[tokio::test]
async fn boxctl_show_follow_prints_records_then_events_until_the_stream_ends() {
    let served = start();
    let sock = served.socket.clone();
    let run = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_boxctl"))
            .env_clear()
            .args(["--socket", sock.to_str().unwrap(), "show", "s1", "--follow"])
            .output()
    });
    bounded(served.stub.followed.notified()).await;
    let sender = served.stub.follow.lock().unwrap().take().unwrap();
    for event in turn(&id("s1"), TurnEnd::Done) {
        sender.send(event).unwrap();
    }
    drop(sender);
    let out = bounded(run).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stdout.starts_with("03:04:05 user [turn 1]"), "{stdout}");
    assert!(
        stdout.ends_with(
            "turn 1 ended: done\n── turn 2\nLet me check.\n→ clock {}\n← ok, 5 bytes\nIt is noon.\n"
        ),
        "{stdout}"
    );
    assert!(stderr.contains("following s1"), "{stderr}");
    assert!(stderr.contains("loopd ended the event stream"), "{stderr}");
}

#[tokio::test]
async fn boxctl_sessions_status_cancel_and_compact_print_readable_answers() {
    let served = start();
    let (code, out, _) = boxctl(&served, &["sessions"]).await;
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        "SESSION  TURNS  RECORDS  STATE\ns1           1        5  idle\n"
    );
    let (code, out, _) = boxctl(&served, &["status"]).await;
    assert_eq!(code, Some(0));
    assert!(out.contains("loopd   0.1.0, up 5s"), "{out}");
    assert!(
        out.contains(
            "broker  brokerd at /run/boxmaker/brokerd.sock: ok; tools run under brokerd's grants\n\
             \x20       exec: bubblewrap + Landlock v4\nllama   "
        ),
        "{out}"
    );
    assert!(
        out.contains("model fakellama, n_ctx 4096, 3 slots"),
        "{out}"
    );
    assert!(
        out.ends_with(
            "\nusage   today 2026-12-01 (UTC): 4 turns, 9 model calls, 13145 tokens evaluated, \
             40000 cached, 2195 generated, model 1m 2s, 9 tool calls; day budget 2195 of 10000 \
             generated tokens\n"
        ),
        "{out}"
    );
    let (code, out, _) = boxctl(&served, &["cancel", "s1"]).await;
    assert_eq!(code, Some(0));
    assert_eq!(out, "cancelled the running turn of s1\n");
    let (code, out, _) = boxctl(&served, &["compact", "s1"]).await;
    assert_eq!(code, Some(0));
    assert!(
        out.starts_with("s1: epoch 2 began; its carry has 812"),
        "{out}"
    );
    let (code, _, err) = boxctl(&served, &["compact", "empty"]).await;
    assert!(
        code == Some(1) && err.contains("nothing to compact"),
        "{err}"
    );
    assert_eq!(boxctl(&served, &["compact", "nope"]).await.0, Some(4));
    let (_, json, _) = boxctl(&served, &["--json", "status"]).await;
    let status: Status = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(status.llama.n_ctx, 4096);
    assert_eq!(
        status.broker.exec.as_deref(),
        Some("bubblewrap + Landlock v4")
    );
}

/// When the stub's notification was kept.

#[tokio::test]
async fn boxctl_notifications_prints_one_line_each_and_raw_json() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["notifications"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.starts_with("2026-01-02T03:04:05"), "{out}");
    // With the labels of the turn that made it.
    assert!(
        out.contains("heartbeat#3 [private, untrusted] the disk is nearly full"),
        "{out}"
    );
    assert!(out.contains("check /var"), "{out}");
    let (code, json, _) = boxctl(&served, &["notifications", "--json"]).await;
    assert_eq!(code, Some(0));
    let list: proto::api::NotificationList = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(list.notifications.len(), 1);
    assert_eq!(list.notifications[0].turn, 3);
}

#[tokio::test]
async fn boxctl_memory_lists_notes_with_labels_and_summaries_reads_every_page() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["memory"]).await;
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "2026-01-02T03:04:05Z s1 [private, untrusted] the user likes otters\n"
    );
    let (_, json, _) = boxctl(&served, &["memory", "--json"]).await;
    let list: proto::api::MemoryList = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(list.notes.len(), 1);
    // s1 has neither summaries nor carries, and says so (nothing as JSON); an unknown session
    // exits 4.
    let (code, out, err) = boxctl(&served, &["summaries", "s1"]).await;
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "no summaries or carries in s1\n"),
        "{err}"
    );
    let (code, out, err) = boxctl(&served, &["summaries", "--json", "s1"]).await;
    assert_eq!((code, out.as_str()), (Some(0), ""), "{err}");
    let (code, _, _) = boxctl(&served, &["summaries", "nope"]).await;
    assert_eq!(code, Some(4));
}
