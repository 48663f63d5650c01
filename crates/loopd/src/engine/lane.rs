//! One session's lane: the task running on it, the tasks waiting, and its event feed.

use super::task_ids::Ticket;
use crate::api::{ApiFailure, Submitted};
use crate::turn::Stop;
use bxcore::{SessionId, TurnEvent};
use proto::api::CompactAnswer;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::{broadcast, oneshot};

/// Events a follower may fall behind by before it is told it missed some.
pub const FOLLOW_BUFFER_EVENTS: usize = 1024;

/// A task waiting for its turn.
pub struct Pending {
    /// What the user asked.
    pub text: String,
    /// What others said before it where it came from, written before it as untrusted text.
    pub overheard: Vec<proto::api::OverheardText>,
    /// Answered when the task's user record is durable (or it cannot run).
    pub reply: oneshot::Sender<Result<Submitted, ApiFailure>>,
    /// Its place among the named tasks, when its client named it.
    pub named: Option<Ticket>,
    /// Its place under `[api] max_waiting_tasks`, given back once its turn starts.
    pub waiting: super::waiting::Waiting,
    /// Nobody watches its turn (a schedule's run): a call that needs the owner's approval is
    /// written as a notification too.
    pub unattended: bool,
    /// Its session must be its own (a schedule's `session = "new"` run): found holding a task
    /// that is not this one, it is refused (`submit::Engine::queue_new`).
    pub new_session: bool,
}

impl Pending {
    /// Answers the waiting client, and any later submission of the same task id, that the
    /// task will not run, and why.
    pub fn refuse(self, why: ApiFailure) {
        if let Some(named) = &self.named {
            named.refused(&why);
        }
        let _ = self.reply.send(Err(why));
    }
}

/// Work for a session's lane: a task, or a compaction asked for through the API. Both run
/// on the lane's one worker, in order, so a compaction never races a turn.
pub enum Work {
    /// A task: a turn.
    Task(Pending),
    /// A compaction; answered when the new epoch's start is durable (or it cannot be).
    Compact(oneshot::Sender<Result<CompactAnswer, ApiFailure>>),
    /// An undo of the last turns; answered once brokerd put the files back and the
    /// `undone` record is durable (or it cannot be).
    Undo(
        proto::UndoTurns,
        oneshot::Sender<Result<proto::UndoAnswer, ApiFailure>>,
    ),
    /// A fork into the named new session; answered once its log is durable.
    Fork(
        proto::ForkRequest,
        SessionId,
        oneshot::Sender<Result<proto::ForkAnswer, ApiFailure>>,
    ),
}

impl Work {
    /// Answers the waiting client that this work will not run, and why.
    pub fn refuse(self, why: ApiFailure) {
        match self {
            Work::Task(pending) => pending.refuse(why),
            Work::Compact(reply) => {
                let _ = reply.send(Err(why));
            }
            Work::Undo(_, reply) => {
                let _ = reply.send(Err(why));
            }
            Work::Fork(_, _, reply) => {
                let _ = reply.send(Err(why));
            }
        }
    }
}

/// A session's work.
pub struct Lane {
    queue: VecDeque<Work>,
    running: Option<Arc<Stop>>,
    events: broadcast::Sender<TurnEvent>,
}

impl Lane {
    /// An idle lane.
    pub fn new() -> Lane {
        Lane {
            queue: VecDeque::new(),
            running: None,
            events: broadcast::channel(FOLLOW_BUFFER_EVENTS).0,
        }
    }

    /// Whether a turn runs.
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Whether a new task has to wait.
    pub fn is_busy(&self) -> bool {
        self.running.is_some() || !self.queue.is_empty()
    }

    /// Tasks waiting.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Marks a turn as running and returns its stop switch.
    pub fn start(&mut self) -> Arc<Stop> {
        let stop = Arc::new(Stop::default());
        self.running = Some(stop.clone());
        stop
    }

    /// The next waiting work, marked as running; or none, and the lane is idle.
    pub fn next(&mut self) -> Option<(Work, Arc<Stop>)> {
        match self.queue.pop_front() {
            Some(pending) => Some((pending, self.start())),
            None => {
                self.running = None;
                None
            }
        }
    }

    /// Queues `pending` behind the running work, unless `queue_len` already wait.
    pub fn enqueue(
        &mut self,
        pending: Work,
        queue_len: usize,
        id: &SessionId,
    ) -> Result<(), ApiFailure> {
        if self.queue.len() >= queue_len {
            return Err(ApiFailure::Busy(format!(
                "session {id} is busy: {} task(s) already wait for it (the limit is {queue_len})",
                self.queue.len()
            )));
        }
        self.queue.push_back(pending);
        Ok(())
    }

    /// Tells the running turn to stop (as a shutdown when `shutdown`) and drops every waiting
    /// task with `why`. Returns whether a turn was told, and how many tasks were dropped.
    pub fn stop_all(&mut self, why: &str, shutdown: bool) -> (bool, u64) {
        let told = match &self.running {
            Some(stop) => {
                if shutdown {
                    stop.shut_down();
                } else {
                    stop.cancel();
                }
                true
            }
            None => false,
        };
        let dropped = self.queue.len() as u64;
        for work in self.queue.drain(..) {
            work.refuse(ApiFailure::Unavailable(why.to_string()));
        }
        (told, dropped)
    }

    /// A feed of this session's events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<TurnEvent> {
        self.events.subscribe()
    }

    /// The sender of this session's events.
    pub fn feed(&self) -> broadcast::Sender<TurnEvent> {
        self.events.clone()
    }

    /// Whether nobody needs this lane any more.
    pub fn is_idle_and_unwatched(&self) -> bool {
        !self.is_busy() && self.events.receiver_count() == 0
    }
}
