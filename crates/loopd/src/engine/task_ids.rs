//! Tasks their clients named (`TaskRequest::task_id`): a second submission of an id its
//! session already has is answered with the first one's state instead of running again, so a
//! client that never got an acknowledgement can safely submit again.
//!
//! A named task is found in its session (the one it names, or `task-<id>`) in one of two
//! places:
//! - live in this process ([`Live`]): waiting in its lane or running. A submission of the same
//!   id follows it ([`follow`]): it waits for the first one's acknowledgement (or refusal),
//!   then gets the turn and its events from then on.
//! - in the session's log: its `User` record keeps the id. Before writing a new task's user
//!   record the worker looks there, holding the session ([`Ticket::answer_recorded`]), so a
//!   task is never begun twice, across restarts too; the answer is the turn and its end.

use super::lane::FOLLOW_BUFFER_EVENTS;
use crate::api::{ApiFailure, Submitted};
use crate::session::Session;
use bxcore::{LogRecord, SessionId, TaskId, TurnEnd, TurnEvent};
use proto::api::TaskAccepted;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{broadcast, mpsc, watch};

/// A named task: its session and its id.
type Key = (SessionId, TaskId);

/// Where a named task is, as a submission of the same id sees it.
#[derive(Debug, Clone)]
pub(super) enum State {
    /// Waiting for its turn (or for a slot).
    Queued,
    /// Its user record is durable and its turn runs.
    Accepted(TaskAccepted),
    /// Its turn ended, with this `ended` event.
    Ended(TaskAccepted, TurnEvent),
    /// It will not run, for this reason.
    Refused(ApiFailure),
}

/// A live named task, as later submissions of its id see it.
#[derive(Debug)]
struct Entry {
    state: watch::Receiver<State>,
    events: broadcast::Sender<TurnEvent>,
}

/// The named tasks waiting or running in this process.
#[derive(Debug, Default)]
pub(super) struct Live {
    tasks: Mutex<HashMap<Key, Entry>>,
}

/// A submission following a live task of the same id.
pub(super) struct Following {
    state: watch::Receiver<State>,
    events: broadcast::Receiver<TurnEvent>,
}

/// What a submission of a named task found.
pub(super) enum Found {
    /// A task of the same id waits or runs here: follow it.
    Live(Following),
    /// None: this submission is the task, and holds its place.
    New(Ticket),
}

impl Live {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live task `task_id` of `session`, or a new place for it.
    pub fn find_or_add(live: &Arc<Live>, session: &SessionId, task_id: TaskId) -> Found {
        let key = (session.clone(), task_id);
        let mut tasks = live.lock();
        if let Some(entry) = tasks.get(&key) {
            // Subscribed before the state is looked at: the `ended` event is put in the state
            // before it is sent, so a follower finds it in one or the other.
            return Found::Live(Following {
                events: entry.events.subscribe(),
                state: entry.state.clone(),
            });
        }
        let (state, seen) = watch::channel(State::Queued);
        let events = broadcast::channel(FOLLOW_BUFFER_EVENTS).0;
        tasks.insert(
            key.clone(),
            Entry {
                state: seen,
                events: events.clone(),
            },
        );
        Found::New(Ticket {
            live: Arc::clone(live),
            key,
            state,
            events,
        })
    }
}

/// A named task's place in [`Live`], held by the task until its turn is over; dropping it
/// takes the task out (later submissions of its id find it in the log).
#[derive(Debug)]
pub struct Ticket {
    live: Arc<Live>,
    key: Key,
    state: watch::Sender<State>,
    events: broadcast::Sender<TurnEvent>,
}

impl Ticket {
    /// The task's id.
    pub fn task_id(&self) -> &TaskId {
        &self.key.1
    }

    /// Its user record is durable.
    pub fn accepted(&self, accepted: &TaskAccepted) {
        self.state.send_replace(State::Accepted(accepted.clone()));
    }

    /// An event of its turn, for the submissions following it; the `ended` one is also kept
    /// for submissions still to come.
    pub fn event(&self, event: &TurnEvent) {
        if let TurnEvent::Ended { .. } = event {
            self.state.send_modify(|state| {
                if let State::Accepted(accepted) = state {
                    *state = State::Ended(accepted.clone(), event.clone());
                }
            });
        }
        // Nobody following is the usual case.
        let _ = self.events.send(event.clone());
    }

    /// It will not run.
    pub fn refused(&self, why: &ApiFailure) {
        self.state.send_replace(State::Refused(why.clone()));
    }

    /// The answer when `session` (held by the caller) already has a task of this id: its
    /// turn and how that ended (an unfinished one was ended as `interrupted` when the session
    /// was opened). The `ended` event carries the session's context label now, which is never
    /// below what it was when that turn ended.
    pub fn answer_recorded(&self, session: &Session) -> Option<Submitted> {
        let records = session.records();
        let turn = records.iter().find_map(|record| match record {
            LogRecord::User {
                turn,
                task_id: Some(id),
                ..
            } if id == self.task_id() => Some(*turn),
            _ => None,
        })?;
        let end = records
            .iter()
            .find_map(|record| match record {
                LogRecord::TurnEnd { turn: t, end, .. } if *t == turn => Some(end.clone()),
                _ => None,
            })
            .unwrap_or(TurnEnd::Interrupted);
        let accepted = TaskAccepted {
            session: session.id().clone(),
            turn,
            end: None,
        };
        let ended = TurnEvent::Ended {
            turn,
            end,
            context: crate::baseline::context_labels(session),
        };
        self.state
            .send_replace(State::Ended(accepted.clone(), ended.clone()));
        Some(ended_answer(accepted, ended))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // Only one ticket per key lives at a time: the entry is this one's.
        self.live.lock().remove(&self.key);
    }
}

/// The answer for a task whose turn ended: the turn with its end, and a stream of its
/// `started` and `ended` events.
fn ended_answer(mut accepted: TaskAccepted, ended: TurnEvent) -> Submitted {
    if let TurnEvent::Ended { end, .. } = &ended {
        accepted.end = Some(end.clone());
    }
    let (events, receiver) = mpsc::unbounded_channel();
    let _ = events.send(TurnEvent::Started {
        session: accepted.session.clone(),
        turn: accepted.turn,
    });
    let _ = events.send(ended);
    Submitted {
        accepted,
        events: receiver,
    }
}

/// The failure when the first submission went away without an answer (its queue was full).
fn gone() -> ApiFailure {
    ApiFailure::Unavailable(
        "the first submission of this task_id was not accepted; submit it again".into(),
    )
}

/// Answers a submission of a named task that is live: once the first one is acknowledged
/// (or refused), its turn and its events from then on (`started` first).
pub(super) async fn follow(following: Following) -> Result<Submitted, ApiFailure> {
    let Following { mut state, events } = following;
    let now = state
        .wait_for(|s| !matches!(s, State::Queued))
        .await
        .map(|s| s.clone())
        .map_err(|_| gone())?;
    match now {
        State::Queued => Err(gone()),
        State::Refused(why) => Err(why),
        State::Ended(accepted, ended) => Ok(ended_answer(accepted, ended)),
        State::Accepted(accepted) => {
            let (sender, receiver) = mpsc::unbounded_channel();
            let _ = sender.send(TurnEvent::Started {
                session: accepted.session.clone(),
                turn: accepted.turn,
            });
            tokio::spawn(forward(events, sender));
            Ok(Submitted {
                accepted,
                events: receiver,
            })
        }
    }
}

/// Passes the task's events on until its turn ends, the listener goes, or the task is gone
/// without an end (its thread died). Only its own turn's events come this way, from the
/// moment the follower subscribed; a `started` among them is the one already sent.
async fn forward(
    mut events: broadcast::Receiver<TurnEvent>,
    sender: mpsc::UnboundedSender<TurnEvent>,
) {
    loop {
        match events.recv().await {
            Ok(TurnEvent::Started { .. }) => {}
            Ok(event) => {
                let last = matches!(event, TurnEvent::Ended { .. });
                if sender.send(event).is_err() || last {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
