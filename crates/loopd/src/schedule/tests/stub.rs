//! A backend stand-in: records each submitted task (whether unattended, and the state file as
//! it was when the task came), and holds each turn open until the test ends it.

use crate::api::{ApiFailure, Backend, Submitted};
use crate::schedule::state::{self, StateFile};
use bxcore::{ApprovalId, Labels, SessionId, TurnEnd, TurnEvent};
use proto::api::*;
use std::path::PathBuf;
use std::sync::Mutex;
use tokio::sync::{broadcast, mpsc, watch};

/// One task the stub got.
#[derive(Debug, Clone)]
pub struct Got {
    pub session: SessionId,
    pub text: String,
    pub unattended: bool,
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
}

impl Stub {
    pub fn new(file: PathBuf) -> Stub {
        Stub {
            file,
            got: Mutex::default(),
            turns: Mutex::default(),
            count: watch::Sender::new(0),
        }
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
        if new_session && self.got().iter().any(|g| g.session == session) {
            return Err(ApiFailure::Forbidden(format!(
                "session {session} exists already"
            )));
        }
        let got = Got {
            session: session.clone(),
            text: task.text,
            unattended,
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
        self.take(task, false, false)
    }
    async fn submit_unattended(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
        self.take(task, true, false)
    }
    async fn submit_unattended_new(&self, task: TaskRequest) -> Result<Submitted, ApiFailure> {
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
