//! A backend stand-in: records each submitted task (whether unattended, its task id, and the
//! state file as it was when the task came), and holds each turn open until the test ends it.
//! A task id it got before in the same session is answered as the engine answers one its log
//! has (the turn, ended), never taken again; while `hold` is set, no submission is answered
//! (a loopd killed before the task reached the engine).

use crate::api::{ApiFailure, Backend, Submitted};
use crate::schedule::state::{self, StateFile};
use bxcore::{ApprovalId, Labels, SessionId, TaskId, TurnEnd, TurnEvent};
use proto::api::*;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{broadcast, mpsc, watch};

/// One task the stub got.
#[derive(Debug, Clone)]
pub struct Got {
    pub session: SessionId,
    pub text: String,
    pub unattended: bool,
    /// Its task id.
    pub task_id: Option<TaskId>,
    /// Whether it had to make its session (`submit_unattended_new`).
    pub new_session: bool,
    /// The state file when `submit` was called.
    pub state: StateFile,
}

pub struct Stub {
    file: PathBuf,
    pub got: Mutex<Vec<Got>>,
    turns: Mutex<Vec<mpsc::UnboundedSender<TurnEvent>>>,
    /// How many tasks it got, for waiting on.
    pub count: watch::Sender<usize>,
    /// Submissions are held, never answered.
    pub hold: AtomicBool,
    /// How many submissions were held, for waiting on.
    pub held: watch::Sender<usize>,
    /// How many submissions were answered as seen before.
    pub replayed: watch::Sender<usize>,
}

impl Stub {
    pub fn new(file: PathBuf) -> Stub {
        Stub {
            file,
            got: Mutex::default(),
            turns: Mutex::default(),
            count: watch::Sender::new(0),
            hold: AtomicBool::new(false),
            held: watch::Sender::new(0),
            replayed: watch::Sender::new(0),
        }
    }

    /// Never answers while `hold` is set.
    async fn held(&self) {
        if self.hold.load(Ordering::SeqCst) {
            self.held.send_modify(|n| *n += 1);
            std::future::pending::<()>().await;
        }
    }

    /// The answer for task `task_id` of `session` when it was got before: its turn, ended
    /// `interrupted` (the stub's turns are never ended by a log).
    fn seen(&self, session: &SessionId, task_id: Option<&TaskId>) -> Option<Submitted> {
        let task_id = task_id?;
        let turn = self
            .got()
            .iter()
            .position(|g| &g.session == session && g.task_id.as_ref() == Some(task_id))?
            as u64
            + 1;
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(TurnEvent::Started {
            session: session.clone(),
            turn,
        });
        let _ = tx.send(TurnEvent::Ended {
            turn,
            end: TurnEnd::Interrupted,
            context: Labels::PUBLIC,
        });
        self.replayed.send_modify(|n| *n += 1);
        Some(Submitted {
            accepted: TaskAccepted {
                session: session.clone(),
                turn,
                end: Some(TurnEnd::Interrupted),
            },
            events: rx,
        })
    }

    pub fn got(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// Ends turn `i` (from 0) with `answer`, `not_approved` refused approvals before it.
    pub fn end(&self, i: usize, answer: &str, end: TurnEnd, not_approved: u32) {
        let turns = self.turns.lock().unwrap();
        let tx = &turns[i];
        for n in 0..not_approved {
            let _ = tx.send(TurnEvent::ApprovalDecided {
                call: bxcore::CallId(u64::from(n)),
                approval: ApprovalId::new(&format!("ap-{n}")).unwrap(),
                decision: bxcore::ApprovalDecision::TimedOut,
            });
        }
        let _ = tx.send(TurnEvent::Content {
            text: answer.into(),
        });
        let _ = tx.send(TurnEvent::Ended {
            turn: i as u64 + 1,
            end,
            context: Labels::PUBLIC,
        });
        // The channel closes when the scheduler's receiver sees it ended: drop ours.
        drop(turns);
        self.turns.lock().unwrap()[i] = mpsc::unbounded_channel().0;
    }

    fn take(
        &self,
        task: TaskRequest,
        unattended: bool,
        new_session: bool,
    ) -> Result<Submitted, ApiFailure> {
        let session = task.session.clone().unwrap();
        if let Some(seen) = self.seen(&session, task.task_id.as_ref()) {
            return Ok(seen);
        }
        if new_session && self.got().iter().any(|g| g.session == session) {
            return Err(ApiFailure::Forbidden(format!(
                "session {session} exists already"
            )));
        }
        let got = Got {
            session: session.clone(),
            text: task.text,
            unattended,
            task_id: task.task_id,
            new_session,
            state: state::load(&self.file).unwrap(),
        };
        let turn = {
            let mut all = self.got.lock().unwrap();
            all.push(got);
            all.len() as u64
        };
        let (tx, rx) = mpsc::unbounded_channel();
        self.turns.lock().unwrap().push(tx);
        self.count.send_modify(|c| *c += 1);
        Ok(Submitted {
            accepted: TaskAccepted {
                session,
                turn,
                end: None,
            },
            events: rx,
        })
    }
}

impl Backend for Stub {
    async fn submit(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
        self.held().await;
        self.take(task, false, false)
    }
    async fn submit_unattended(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
        self.held().await;
        self.take(task, true, false)
    }
    async fn submit_unattended_new(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
        self.held().await;
        self.take(task, true, true)
    }
    fn sessions(&self) -> Result<SessionList, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    fn records(&self, _: &SessionId, _: u64, _: u64) -> Result<RecordsPage, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    fn follow(&self, _: &SessionId) -> Result<broadcast::Receiver<TurnEvent>, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    fn cancel(&self, _: &SessionId) -> Result<CancelAnswer, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    async fn compact(&self, _: &SessionId) -> Result<CompactAnswer, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    fn memory(&self) -> Result<MemoryList, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    fn notifications(&self) -> Result<NotificationList, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    async fn status(&self) -> Status {
        unimplemented!("not used by the scheduler")
    }
    fn approvals(&self) -> Result<ApprovalList, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    async fn answer_approval(
        &self,
        _: &ApprovalId,
        _: ApprovalAnswer,
        _: Option<u32>,
    ) -> Result<ApprovalAnswered, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    fn schedules(&self) -> Result<ScheduleList, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    async fn run_schedule(&self, _: &str) -> Result<ScheduleStarted, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    fn pause_schedule(&self, _: &str, _: bool) -> Result<ScheduleInfo, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    fn usage(&self, _: &crate::api::UsageQuery) -> Result<proto::api::UsageReport, ApiFailure> {
        unimplemented!("not used by the scheduler")
    }
    fn metrics(&self) -> std::sync::Arc<dyn bxmetrics::Source> {
        unimplemented!("not used by the scheduler")
    }
}
