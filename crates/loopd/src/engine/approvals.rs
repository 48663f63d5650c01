//! The calls that wait for the owner's approval, across sessions (the desk): listed and
//! answered through the API (`GET /v1/approvals`, `POST /v1/approvals/{id}`), each answer
//! handed to the turn that waits and acknowledged once that turn has recorded the decision.
//!
//! A turn of the engine reaches the desk through [`TurnOwner`], its `runtime::Owner`, which
//! also holds the turn's main-slot permit: it gives the permit back while the turn waits, so
//! another session's turn runs meanwhile (and can wait for the owner too), and takes it again
//! before the turn goes on.

use super::pool::Ready;
use crate::api::ApiFailure;
use crate::blocking::{Blocking, OnRuntimeThread};
use crate::runtime::{Owner, OwnerReply, Stop};
use bxcore::ApprovalId;
use proto::api::{ApprovalAnswer, ApprovalAnswered, ApprovalList, PendingApproval};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

/// The most calls that wait for the owner at once, across sessions; a call asked beyond it is
/// void at once.
pub const MAX_WAITING_APPROVALS: usize = 64;

/// One call waiting, and the way to its turn.
struct Waiting {
    pending: PendingApproval,
    reply: oneshot::Sender<OwnerReply>,
}

/// Every call waiting for the owner now, oldest first.
#[derive(Default)]
pub(crate) struct Desk {
    waiting: Mutex<Vec<Waiting>>,
}

impl Desk {
    fn lock(&self) -> MutexGuard<'_, Vec<Waiting>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lists `pending`; its answer will come on the receiver.
    pub(crate) fn put(
        &self,
        pending: PendingApproval,
    ) -> Result<oneshot::Receiver<OwnerReply>, String> {
        let mut waiting = self.lock();
        if waiting.len() >= MAX_WAITING_APPROVALS {
            return Err(format!(
                "{MAX_WAITING_APPROVALS} calls already wait for the owner, the most loopd keeps \
                 (MAX_WAITING_APPROVALS)"
            ));
        }
        if waiting.iter().any(|w| w.pending.id == pending.id) {
            return Err(format!("approval {} already waits", pending.id));
        }
        let (reply, answers) = oneshot::channel();
        waiting.push(Waiting { pending, reply });
        Ok(answers)
    }

    /// Takes `id` off the list; `false` when it was not there (an answer took it).
    pub(crate) fn withdraw(&self, id: &ApprovalId) -> bool {
        let mut waiting = self.lock();
        let before = waiting.len();
        waiting.retain(|w| &w.pending.id != id);
        waiting.len() != before
    }

    /// How many calls wait now.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Every call waiting now, oldest first.
    pub(crate) fn list(&self) -> ApprovalList {
        ApprovalList {
            approvals: self.lock().iter().map(|w| w.pending.clone()).collect(),
        }
    }

    /// Gives the owner's `answer` (from a peer of user `uid`) to the turn waiting on `id`, and
    /// resolves once the turn has recorded the decision. The id leaves the list at once, so a
    /// second answer is not found.
    pub(crate) async fn answer(
        &self,
        id: &ApprovalId,
        answer: ApprovalAnswer,
        uid: Option<u32>,
    ) -> Result<ApprovalAnswered, ApiFailure> {
        crate::api::check_approval_answer(&answer)?;
        let (recorded, acknowledged) = oneshot::channel();
        let reply = OwnerReply {
            answer: answer.answer,
            reason: answer.reason,
            uid,
            recorded,
        };
        let (session, call) = {
            let mut waiting = self.lock();
            let at = waiting.iter().position(|w| &w.pending.id == id);
            let Some(taken) = at.map(|at| waiting.remove(at)) else {
                return Err(not_waiting(id));
            };
            // Sent under the lock: a turn whose wait ends meanwhile finds the id gone and the
            // answer in its channel.
            if taken.reply.send(reply).is_err() {
                return Err(not_waiting(id));
            }
            (taken.pending.session, taken.pending.call)
        };
        match acknowledged.await {
            Ok(Ok(decision)) => Ok(ApprovalAnswered {
                id: id.clone(),
                session,
                call,
                decision,
            }),
            Ok(Err(why)) => Err(ApiFailure::Internal(format!(
                "the decision on approval {id} could not be recorded, and the call did not run: \
                 {why}"
            ))),
            Err(_) => Err(ApiFailure::Internal(format!(
                "the turn waiting on approval {id} ended before it recorded the answer"
            ))),
        }
    }
}

fn not_waiting(id: &ApprovalId) -> ApiFailure {
    ApiFailure::NotFound(format!(
        "no call waits for approval {id}: it was answered, timed out or made void, or never asked"
    ))
}

/// A turn's way to the desk and its main slot: the permit it ran with, given back while the
/// turn waits for the owner and taken again (unless the turn is stopped) before it goes on.
pub(crate) struct TurnOwner<'a> {
    desk: &'a Desk,
    slots: Arc<Semaphore>,
    permit: Mutex<Option<OwnedSemaphorePermit>>,
    blocking: &'a Blocking,
    /// The stop of the whole turn (a child's wait gives back its parent's slot).
    stop: Stop,
    /// Whether nobody watches the turn (a schedule's run; its children share this owner).
    unattended: bool,
    /// Run once the slot is taken again after a wait: another session may have used it
    /// meanwhile, so the turn's cache is brought back (`kv`).
    rewarm: Option<Box<dyn Fn() + Send + Sync + 'a>>,
    /// The pool whose worker runs the turn: told while the turn has its slot given back (it
    /// waits for brokerd or the owner), so that it holds no worker meanwhile (`pool`).
    workers: Option<Arc<Ready>>,
    /// Whether the turn's worker is parked now.
    parked: AtomicBool,
}

impl<'a> TurnOwner<'a> {
    /// This owner, running `rewarm` whenever the turn takes its slot again after a wait.
    pub(crate) fn with_rewarm(mut self, rewarm: impl Fn() + Send + Sync + 'a) -> TurnOwner<'a> {
        self.rewarm = Some(Box::new(rewarm));
        self
    }

    /// This owner, parking its worker in `workers` while the turn gives its slot back.
    pub(super) fn parking_in(mut self, workers: Arc<Ready>) -> TurnOwner<'a> {
        self.workers = Some(workers);
        self
    }

    fn park(&self) {
        if let Some(workers) = &self.workers
            && !self.parked.swap(true, Ordering::SeqCst)
        {
            workers.park();
        }
    }

    fn unpark(&self) {
        if let Some(workers) = &self.workers
            && self.parked.swap(false, Ordering::SeqCst)
        {
            workers.unpark();
        }
    }

    /// The owner of a turn that holds `permit` of `slots` and is stopped by `stop`;
    /// `unattended` when nobody watches it.
    pub(crate) fn new(
        desk: &'a Desk,
        slots: Arc<Semaphore>,
        permit: OwnedSemaphorePermit,
        blocking: &'a Blocking,
        stop: Stop,
        unattended: bool,
    ) -> TurnOwner<'a> {
        TurnOwner {
            desk,
            slots,
            permit: Mutex::new(Some(permit)),
            blocking,
            stop,
            unattended,
            rewarm: None,
            workers: None,
            parked: AtomicBool::new(false),
        }
    }

    /// Whether the turn holds its main slot now (not given back for a wait it was stopped in).
    pub(crate) fn holds_slot(&self) -> bool {
        self.permit().is_some()
    }

    fn permit(&self) -> MutexGuard<'_, Option<OwnedSemaphorePermit>> {
        self.permit.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Owner for TurnOwner<'_> {
    fn ask(&self, asked: PendingApproval) -> Result<oneshot::Receiver<OwnerReply>, String> {
        self.desk.put(asked)
    }

    fn withdraw(&self, id: &ApprovalId) -> bool {
        self.desk.withdraw(id)
    }

    fn release_slot(&self) {
        drop(self.permit().take());
        self.park();
    }

    fn unattended(&self) -> bool {
        self.unattended
    }

    fn retake_slot(&self) -> bool {
        self.unpark();
        if self.permit().is_some() {
            return true;
        }
        let (slots, token) = (Arc::clone(&self.slots), self.stop.token().clone());
        let taken = self.blocking.wait(async move {
            Ok::<_, OnRuntimeThread>(tokio::select! {
                biased;
                () = token.cancelled() => None,
                permit = slots.acquire_owned() => permit.ok(),
            })
        });
        match taken {
            Ok(Some(permit)) => {
                *self.permit() = Some(permit);
                if let Some(rewarm) = &self.rewarm {
                    rewarm();
                }
                true
            }
            Ok(None) => false,
            Err(e) => {
                tracing::error!(error = %e, "cannot take the main slot again");
                false
            }
        }
    }
}

impl Drop for TurnOwner<'_> {
    fn drop(&mut self) {
        // A turn that ended while parked: its worker is at work again.
        self.unpark();
    }
}
