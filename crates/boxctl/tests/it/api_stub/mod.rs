//! The stand-in engine behind loopd's real API layer that `against_api.rs` drives boxctl against,
//! and the helpers that start it and run boxctl.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use bxcore::{
    ApprovalDecision, CallId, DataClass, DenyReason, SessionId, Timestamp, ToolCall, ToolOutcome,
    TurnEnd, TurnEvent,
};
use loopd::api::{ApiFailure, ApiOptions, Backend, Submitted, bind_socket, serve};
use proto::api::{
    BrokerStatus, CancelAnswer, LlamaStatus, LoopdStatus, RecordsPage, SessionInfo, SessionList,
    SlotRoles, Status, TaskAccepted, TaskRequest,
};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, broadcast, mpsc, oneshot};

mod approvals;
mod budgets;
mod records;
mod schedules;
pub mod usage;
pub use approvals::{own_uid, stub_pending_approval};
pub use budgets::SPENT;
pub use records::s1_records;
pub use schedules::{StubSchedules, stub_hourly, stub_schedule};

/// How long a test waits for anything, in milliseconds.
pub const WAIT_MS: u64 = 20_000;
/// When the stub's notification was made.
pub const NOTIFICATION_TIME: &str = "2026-01-02T03:04:05Z";

pub async fn bounded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_millis(WAIT_MS), future)
        .await
        .expect("timed out")
}

pub fn id(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

pub fn time() -> Timestamp {
    Timestamp::parse("2026-01-02T03:04:05Z").unwrap()
}

pub fn clock_call() -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: "clock".into(),
        arguments: "{}".into(),
    }
}

pub fn turn(session: &SessionId, end: TurnEnd) -> Vec<TurnEvent> {
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

/// Sessions: `s1` (known), `busy` (full queue), `fail` (its turn fails), `budget` and `spent`
/// (`budgets`), `ask` (its turn asks for approval `ap-1` and waits for the answer),
/// `ask-timeout` (its turn asks, and the wait times out at once); no other exists. Schedules:
/// `daily` and `hourly`.
pub struct Stub {
    pub follow: Mutex<Option<broadcast::Sender<TurnEvent>>>,
    pub followed: Notify,
    /// Every answer to `ap-1`, with the peer's uid.
    pub answered: Mutex<Vec<(proto::api::ApprovalAnswer, Option<u32>)>>,
    /// The `ask` turn waiting for its answer: the rest of its events go here.
    pub waiting: Mutex<Option<mpsc::UnboundedSender<TurnEvent>>>,
    /// Notified when the `ask` turn has asked.
    pub asked: Notify,
    /// `daily` and `hourly` (see [`schedules`]).
    pub schedules: StubSchedules,
    /// Every task submitted, in order.
    pub submitted: Mutex<Vec<TaskRequest>>,
}

impl Backend for Stub {
    async fn submit(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
        self.submitted.lock().unwrap().push(task.clone());
        let session = task.session.unwrap_or_else(|| id("new-1"));
        if let Some(events) = self.asking_turn(&session) {
            return Ok(Submitted {
                accepted: TaskAccepted {
                    session,
                    turn: 3,
                    end: None,
                },
                events,
            });
        }
        let end = match session.as_str() {
            "s1" | "new-1" => TurnEnd::Done,
            "fail" => TurnEnd::Failed {
                reason: "llama-server is gone".into(),
            },
            "busy" => return Err(ApiFailure::Busy("session busy has 8 tasks waiting".into())),
            "budget" => budgets::stopped(),
            "spent" => return Err(ApiFailure::OverBudget(SPENT.into())),
            _ => return Err(ApiFailure::NotFound(format!("no session {session}"))),
        };
        let (tx, rx) = mpsc::unbounded_channel();
        for event in turn(&session, end) {
            tx.send(event).unwrap();
        }
        Ok(Submitted {
            accepted: TaskAccepted {
                session,
                turn: 2,
                end: None,
            },
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
                to: None,
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
                kind: "brokerd".into(),
                socket: Some("/run/boxmaker/brokerd.sock".into()),
                ok: true,
                note: "tools run under brokerd's grants".into(),
                exec: Some("bubblewrap + Landlock v4".into()),
                checkpoints: None,
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
                endpoints: Vec::new(),
            },
            usage: usage::usage_today(),
            kv: None,
        }
    }
    fn approvals(&self) -> Result<proto::api::ApprovalList, ApiFailure> {
        Ok(proto::api::ApprovalList {
            approvals: vec![stub_pending_approval()],
        })
    }

    async fn answer_approval(
        &self,
        approval: &bxcore::ApprovalId,
        answer: proto::api::ApprovalAnswer,
        uid: Option<u32>,
    ) -> Result<proto::api::ApprovalAnswered, ApiFailure> {
        if approval.as_str() != "ap-1" {
            return Err(ApiFailure::NotFound(format!(
                "no call waits for approval {approval}"
            )));
        }
        self.answered.lock().unwrap().push((answer.clone(), uid));
        if let Some(turn) = self.waiting.lock().unwrap().take() {
            for event in asked_turn_rest(answer.answer.decision()) {
                let _ = turn.send(event);
            }
        }
        Ok(proto::api::ApprovalAnswered {
            id: approval.clone(),
            session: SessionId::new("s1").unwrap(),
            call: bxcore::CallId(4),
            decision: answer.answer.decision(),
        })
    }
    fn schedules(&self) -> Result<proto::api::ScheduleList, ApiFailure> {
        Ok(self.schedules.list())
    }

    async fn run_schedule(&self, name: &str) -> Result<proto::api::ScheduleStarted, ApiFailure> {
        self.schedules.run(name)
    }

    fn pause_schedule(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<proto::api::ScheduleInfo, ApiFailure> {
        self.schedules.pause(name, paused)
    }

    fn usage(&self, query: &loopd::api::UsageQuery) -> Result<proto::api::UsageReport, ApiFailure> {
        usage::report(query)
    }

    fn metrics(&self) -> Arc<dyn loopd::api::MetricsSource> {
        Arc::new(usage::StubMetrics)
    }
}

impl Stub {
    /// The events of a turn of `ask` or `ask-timeout`; `None` for other sessions.
    fn asking_turn(&self, session: &SessionId) -> Option<mpsc::UnboundedReceiver<TurnEvent>> {
        let (tx, rx) = mpsc::unbounded_channel();
        match session.as_str() {
            "ask" => {
                for event in asked_turn_start(session) {
                    tx.send(event).unwrap();
                }
                *self.waiting.lock().unwrap() = Some(tx);
                self.asked.notify_one();
            }
            "ask-timeout" => {
                let start = asked_turn_start(session);
                for event in start
                    .into_iter()
                    .chain(asked_turn_rest(ApprovalDecision::TimedOut))
                {
                    tx.send(event).unwrap();
                }
            }
            _ => return None,
        }
        Some(rx)
    }
}

/// The start of a turn that asks for approval `ap-1` (the stub's pending approval).
pub fn asked_turn_start(session: &SessionId) -> Vec<TurnEvent> {
    let pending = stub_pending_approval();
    vec![
        TurnEvent::Started {
            session: session.clone(),
            turn: 3,
        },
        TurnEvent::ToolCall {
            call: pending.call,
            tool_call: ToolCall {
                id: "c4".into(),
                name: pending.tool.clone(),
                arguments: pending.arguments.clone(),
            },
        },
        TurnEvent::ApprovalRequested {
            call: pending.call,
            approval: pending.id,
            tool: pending.tool,
            arguments: pending.arguments,
            reason: pending.reason,
            timeout_ms: pending.timeout_ms,
        },
    ]
}

/// The rest of that turn once `decision` is in: the call's result and the answer.
pub fn asked_turn_rest(decision: ApprovalDecision) -> Vec<TurnEvent> {
    let pending = stub_pending_approval();
    let (outcome, answer) = match decision.approves() {
        true => (ToolOutcome::Ok, "Saved."),
        false => (
            ToolOutcome::Denied {
                reason: DenyReason::NotApproved,
            },
            "The owner did not approve; nothing was saved.",
        ),
    };
    vec![
        TurnEvent::ApprovalDecided {
            call: pending.call,
            approval: pending.id,
            decision,
        },
        TurnEvent::ToolResult {
            call: pending.call,
            outcome,
            class: DataClass::Public,
            untrusted: false,
            truncated: false,
            bytes: 12,
        },
        TurnEvent::Content {
            text: answer.into(),
        },
        TurnEvent::Ended {
            turn: 3,
            end: TurnEnd::Done,
            context: Default::default(),
        },
    ]
}

pub struct Served {
    pub socket: PathBuf,
    pub stub: Arc<Stub>,
    _stop: oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

pub fn start() -> Served {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("loopd.sock");
    let mut options = ApiOptions::from_config(&loopd::config::Api::default()).unwrap();
    options.page_records = 2;
    let listener = bind_socket(&socket, None).unwrap();
    let stub = Arc::new(Stub {
        follow: Mutex::new(Some(broadcast::channel(16).0)),
        followed: Notify::new(),
        answered: Mutex::new(Vec::new()),
        waiting: Mutex::new(None),
        asked: Notify::new(),
        schedules: StubSchedules::default(),
        submitted: Mutex::new(Vec::new()),
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
pub async fn boxctl(served: &Served, args: &[&str]) -> (Option<i32>, String, String) {
    boxctl_fed(served, args, b"").await
}

/// Runs boxctl against `served` with `args` and `stdin` as its standard input (a pipe, not a
/// terminal), off the async threads.
pub async fn boxctl_fed(
    served: &Served,
    args: &[&str],
    stdin: &[u8],
) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_boxctl"));
    cmd.env_clear()
        .env("BOXCTL_SOCKET", &served.socket)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let stdin = stdin.to_vec();
    let out: Output = bounded(tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn()?;
        if let Some(mut input) = child.stdin.take() {
            // boxctl may not read it all (a refused command): a broken pipe is no failure.
            let _ = input.write_all(&stdin);
        }
        child.wait_with_output()
    }))
    .await
    .unwrap()
    .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}
