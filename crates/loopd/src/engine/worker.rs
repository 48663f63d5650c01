//! The thread that runs one session's tasks, one after another.

use super::lane::{Pending, Work};
use super::{Inner, store_failure};
use crate::api::{ApiFailure, Submitted};
use crate::turn::{Runtime, Stop, run_turn, start_turn};
use bxcore::{SessionId, TurnEvent};
use proto::api::TaskAccepted;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::mpsc;

/// Starts the worker of session `id` with its first work.
pub fn spawn(
    inner: Arc<Inner>,
    id: SessionId,
    first: Work,
    stop: Arc<Stop>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(format!("turn-{id}"))
        .spawn(move || work(&inner, &id, first, stop))
        .map(|_| ())
}

fn work(inner: &Arc<Inner>, id: &SessionId, first: Work, stop: Arc<Stop>) {
    let mut task = Some((first, stop));
    while let Some((work, stop)) = task {
        match work {
            Work::Task(pending) => run_one(inner, id, pending, &stop),
            Work::Compact(reply) => super::compact::run(inner, id, reply, &stop),
        }
        let mut lanes = inner.lock_lanes();
        task = lanes.get_mut(id).and_then(|lane| lane.next());
        if task.is_none() && lanes.get(id).is_some_and(|l| l.is_idle_and_unwatched()) {
            lanes.remove(id);
        }
    }
    inner.worker_done.notify_waiters();
}

/// Runs one task: waits for a main slot, writes its user record, acknowledges, runs the turn.
fn run_one(inner: &Inner, id: &SessionId, pending: Pending, stop: &Stop) {
    let permit = inner
        .parts
        .handle
        .block_on(inner.slots.clone().acquire_owned());
    let Ok(_permit) = permit else {
        let _ = pending.reply.send(Err(ApiFailure::Unavailable(
            "loopd is shutting down".into(),
        )));
        return;
    };
    if stop.cancelled.load(Ordering::SeqCst) || inner.shutting_down.load(Ordering::SeqCst) {
        let _ = pending.reply.send(Err(ApiFailure::Unavailable(
            "cancelled before it started".into(),
        )));
        return;
    }
    let mut session = match inner.parts.store.open_or_create(id) {
        Ok(session) => session,
        Err(e) => {
            tracing::error!(session = %id, error = %e, "cannot open the session");
            let _ = pending.reply.send(Err(store_failure(e)));
            return;
        }
    };
    let turn = match start_turn(&mut session, &pending.text) {
        Ok(turn) => turn,
        Err(e) => {
            tracing::error!(session = %id, error = %e, "cannot record the task");
            let _ = pending.reply.send(Err(store_failure(e)));
            return;
        }
    };
    let (events, receiver) = mpsc::unbounded_channel();
    let accepted = TaskAccepted {
        session: id.clone(),
        turn,
    };
    // The submitter may be gone (a client that disconnected): the turn runs all the same.
    let _ = pending.reply.send(Ok(Submitted {
        accepted,
        events: receiver,
    }));
    let feed = inner.lock_lanes().get(id).map(|lane| lane.feed());
    let parts = &inner.parts;
    let registry = crate::subagent::registry_for(&parts.tools.registry(id), id, &parts.cfg);
    let rt = Runtime {
        cfg: &parts.cfg,
        client: &parts.client,
        port: parts.port.as_ref(),
        registry: &registry,
        system: &parts.system,
        n_ctx: parts.server.n_ctx,
    };
    let mut on_event = |event: &TurnEvent| {
        let _ = events.send(event.clone());
        if let Some(feed) = &feed {
            let _ = feed.send(event.clone());
        }
    };
    if let Err(e) = run_turn(&rt, &mut session, stop, &mut on_event) {
        tracing::warn!(session = %id, turn, error = %e, "turn failed");
    }
}
