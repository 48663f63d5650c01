//! The boxctl binary against loopd's real API layer (`loopd::api::serve`) with a scripted
//! stand-in engine: what each command prints and its exit code. The end-to-end tests with
//! the real engine and fakellama live in the workspace's `tests/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bxcore::{
    CallId, DataClass, LogRecord, SessionId, Timestamp, ToolCall, ToolOutcome, TurnEnd, TurnEvent,
};
use loopd::api::{ApiFailure, ApiOptions, Backend, Submitted, bind_socket, serve};
use proto::api::{
    BrokerStatus, CancelAnswer, LlamaStatus, LoopdStatus, RecordsPage, SessionInfo, SessionList,
    SlotRoles, Status, TaskAccepted, TaskRequest,
};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, broadcast, mpsc, oneshot};

/// How long a test waits for anything, in milliseconds.
const WAIT_MS: u64 = 20_000;

async fn bounded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_millis(WAIT_MS), future)
        .await
        .expect("timed out")
}

fn id(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn time() -> Timestamp {
    Timestamp::parse("2026-01-02T03:04:05Z").unwrap()
}

fn clock_call() -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: "clock".into(),
        arguments: "{}".into(),
    }
}

/// Session `s1`'s records: five, so pages of two take three requests.
fn s1_records() -> Vec<LogRecord> {
    let t = time();
    vec![
        LogRecord::User {
            time: t,
            turn: 1,
            content: "what time is it?".into(),
        },
        LogRecord::Assistant {
            time: t,
            content: String::new(),
            reasoning: None,
            tool_calls: vec![clock_call()],
            usage: None,
        },
        LogRecord::ToolResult {
            time: t,
            call: CallId(1),
            tool_call_id: "c1".into(),
            content: "12:00".into(),
            class: DataClass::Public,
            untrusted: false,
            truncated: false,
            outcome: ToolOutcome::Ok,
            by_loopd: false,
        },
        LogRecord::Assistant {
            time: t,
            content: "It is noon.".into(),
            reasoning: None,
            tool_calls: vec![],
            usage: None,
        },
        LogRecord::TurnEnd {
            time: t,
            turn: 1,
            end: TurnEnd::Done,
        },
    ]
}

fn turn(session: &SessionId, end: TurnEnd) -> Vec<TurnEvent> {
    vec![
        TurnEvent::Started {
            session: session.clone(),
            turn: 2,
        },
        TurnEvent::Content {
            text: "Let me check.".into(),
        },
        TurnEvent::ToolCall {
            call: CallId(1),
            tool_call: clock_call(),
        },
        TurnEvent::ToolResult {
            call: CallId(1),
            outcome: ToolOutcome::Ok,
            class: DataClass::Public,
            untrusted: false,
            truncated: false,
            bytes: 5,
        },
        TurnEvent::Content {
            text: "It is noon.".into(),
        },
        TurnEvent::Ended {
            turn: 2,
            end,
            context: Default::default(),
        },
    ]
}

/// Sessions: `s1` (known), `busy` (full queue), `fail` (its turn fails); no other exists.
struct Stub {
    follow: Mutex<Option<broadcast::Sender<TurnEvent>>>,
    followed: Notify,
}

impl Backend for Stub {
    async fn submit(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
        let session = task.session.unwrap_or_else(|| id("new-1"));
        let end = match session.as_str() {
            "s1" | "new-1" => TurnEnd::Done,
            "fail" => TurnEnd::Failed {
                reason: "llama-server is gone".into(),
            },
            "busy" => return Err(ApiFailure::Busy("session busy has 8 tasks waiting".into())),
            _ => return Err(ApiFailure::NotFound(format!("no session {session}"))),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        for event in turn(&session, end) {
            tx.send(event).unwrap();
        }
        Ok(Submitted {
            accepted: TaskAccepted { session, turn: 2 },
            events: rx,
        })
    }

    fn sessions(&self) -> Result<SessionList, ApiFailure> {
        Ok(SessionList {
            sessions: vec![SessionInfo {
                id: id("s1"),
                last_turn: 1,
                records: 5,
                busy: false,
                queued: 0,
            }],
        })
    }

    fn records(&self, sid: &SessionId, from: u64, limit: u64) -> Result<RecordsPage, ApiFailure> {
        if sid.as_str() != "s1" {
            return Err(ApiFailure::NotFound(format!("no session {sid}")));
        }
        let all = s1_records();
        let end = (from + limit).min(all.len() as u64);
        Ok(RecordsPage {
            session: sid.clone(),
            from,
            records: all[from as usize..end as usize].to_vec(),
            next: (end < all.len() as u64).then_some(end),
        })
    }

    fn follow(&self, sid: &SessionId) -> Result<broadcast::Receiver<TurnEvent>, ApiFailure> {
        if sid.as_str() != "s1" {
            return Err(ApiFailure::NotFound(format!("no session {sid}")));
        }
        let receiver = self.follow.lock().unwrap().as_ref().unwrap().subscribe();
        self.followed.notify_one();
        Ok(receiver)
    }

    fn cancel(&self, sid: &SessionId) -> Result<CancelAnswer, ApiFailure> {
        Ok(CancelAnswer {
            session: sid.clone(),
            cancelled: true,
            dropped: 0,
        })
    }

    async fn compact(&self, sid: &SessionId) -> Result<proto::api::CompactAnswer, ApiFailure> {
        match sid.as_str() {
            "s1" => Ok(proto::api::CompactAnswer {
                session: sid.clone(),
                epoch: 2,
                model_failure: None,
                carry_chars: 812,
                notes: 1,
            }),
            "empty" => Err(ApiFailure::BadRequest("nothing to compact".into())),
            _ => Err(ApiFailure::NotFound(format!("no session {sid}"))),
        }
    }

    fn notifications(&self) -> Result<proto::api::NotificationList, ApiFailure> {
        Ok(proto::api::NotificationList {
            notifications: vec![proto::api::Notification {
                time: Timestamp::parse(NOTIFICATION_TIME).unwrap(),
                session: SessionId::new("heartbeat").unwrap(),
                turn: 3,
                text: "the disk is nearly full\ncheck /var".into(),
                class: bxcore::DataClass::Private,
                untrusted: true,
            }],
        })
    }

    fn memory(&self) -> Result<proto::api::MemoryList, ApiFailure> {
        Ok(proto::api::MemoryList {
            notes: vec![bxcore::MemoryNote {
                time: Timestamp::parse("2026-01-02T03:04:05Z").unwrap(),
                session: SessionId::new("s1").unwrap(),
                text: "the user likes otters".into(),
                class: DataClass::Private,
                untrusted: true,
            }],
        })
    }

    async fn status(&self) -> Status {
        Status {
            loopd: LoopdStatus {
                version: "0.1.0".into(),
                uptime_s: 5,
                running: 0,
                queued: 0,
            },
            broker: BrokerStatus {
                kind: "fake".into(),
                socket: None,
                ok: true,
                note: "fake tools (no broker configured)".into(),
            },
            llama: LlamaStatus {
                url: "http://127.0.0.1:8080".into(),
                ok: true,
                error: None,
                n_ctx: 4096,
                total_slots: 3,
                model: "fakellama".into(),
                slots: SlotRoles {
                    main: 0,
                    background: 1,
                    subagent: 2,
                },
            },
        }
    }
}

struct Served {
    socket: PathBuf,
    stub: Arc<Stub>,
    _stop: oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

fn start() -> Served {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("loopd.sock");
    let mut options = ApiOptions::from_config(&loopd::config::Api::default()).unwrap();
    options.page_records = 2;
    let listener = bind_socket(&socket, None).unwrap();
    let stub = Arc::new(Stub {
        follow: Mutex::new(Some(broadcast::channel(16).0)),
        followed: Notify::new(),
    });
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(listener, Arc::clone(&stub), options, async move {
        let _ = stopped.await;
    }));
    Served {
        socket,
        stub,
        _stop: stop,
        _dir: dir,
    }
}

/// Runs boxctl against `served` with `args`, off the async threads.
async fn boxctl(served: &Served, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_boxctl"));
    cmd.env_clear()
        .env("BOXCTL_SOCKET", &served.socket)
        .args(args);
    let out: Output = bounded(tokio::task::spawn_blocking(move || cmd.output()))
        .await
        .unwrap()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

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
        out.contains("broker  fake: ok; fake tools (no broker configured)"),
        "{out}"
    );
    assert!(
        out.contains("model fakellama, n_ctx 4096, 3 slots"),
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
}

/// When the stub's notification was kept.
const NOTIFICATION_TIME: &str = "2026-01-02T03:04:05Z";

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
