//! One session's tasks, one after another, run by a pool worker (`pool`).

use super::approvals::TurnOwner;
use super::lane::{Pending, Work};
use super::{EngineParts, Inner, store_failure, unwind};
use crate::api::{ApiFailure, Submitted};
use crate::blocking::OnRuntimeThread;
use crate::kv::Occupant;
use crate::route::{Lease, Targets};
use crate::session::Session;
use crate::tools::Registry;
use crate::turn::{
    NoOwner, Owner, Runtime, Stop, TurnError, finish_turn, run_foreground, start_task,
};
use bxcore::{LogRecord, SessionId, TurnEnd, TurnEvent};
use proto::api::TaskAccepted;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::OwnedSemaphorePermit;
use tokio::sync::mpsc;

/// How many times a session waiting for its main slot is routed again because its endpoint
/// went down meanwhile.
pub const MAX_REROUTES: u32 = 3;

/// Runs session `id`'s work, from `first` to the end of its lane's queue, on a pool worker.
pub(super) fn work(inner: &Arc<Inner>, id: &SessionId, first: Work, stop: Arc<Stop>) {
    let mut task = Some((first, stop));
    while let Some((work, stop)) = task {
        // A panic ends this work only: its waiting client is answered by the dropped reply,
        // its slot is given back by the unwinding, and the lane goes on below.
        let _ = unwind::catch("a session's work", id, || match work {
            Work::Task(pending) => run_one(inner, id, pending, &stop),
            Work::Compact(reply) => super::compact::run(inner, id, reply, &stop),
            Work::Undo(asked, reply) => super::undo::run(inner, id, &asked, reply),
            Work::Fork(asked, new, reply) => super::fork::run(inner, id, (&asked, &new), reply),
        });
        let mut lanes = inner.lock_lanes();
        task = lanes.get_mut(id).and_then(|lane| lane.next());
        if task.is_none() && lanes.get(id).is_some_and(|l| l.is_idle_and_unwatched()) {
            lanes.remove(id);
        }
    }
    inner.worker_done.notify_waiters();
}

/// Runs one task: the turn on a main slot, then the background work after it (summaries,
/// compaction) with the main slot given back. The lane stays busy until both are done, so the
/// session's log never has two writers.
fn run_one(inner: &Inner, id: &SessionId, pending: Pending, stop: &Stop) {
    if let Some(ran) = foreground(inner, id, pending, stop) {
        background(inner, id, ran);
    }
}

/// A turn that ran: its session (still held), its tools and how it ended.
struct Ran {
    session: Session,
    registry: Registry,
    result: Result<TurnEnd, TurnError>,
    /// Where its calls went: the background work goes near them.
    models: Targets,
}

/// The runtime of a task of this engine with `registry`, whose calls wait for the owner
/// through `owner` and whose spending goes to `meter`.
pub(super) fn runtime<'a>(
    parts: &'a EngineParts,
    models: &'a Targets,
    registry: &'a Registry,
    owner: &'a dyn Owner,
    meter: &'a dyn crate::turn::Meter,
) -> Runtime<'a> {
    Runtime {
        cfg: &parts.cfg,
        models,
        blocking: &parts.blocking,
        port: parts.port.as_ref(),
        registry,
        system: &parts.system,
        n_ctx: parts.models.server().n_ctx,
        children: &crate::subagent::Subagents,
        owner,
        meter,
    }
}

/// Waits for a main slot, writes the task's user record, acknowledges it and runs the turn.
/// The main-slot permit is given back on return, and the submitter's event stream ends (its
/// sender is dropped here, after the turn's `ended` event). `None`: the task did not run.
fn foreground(inner: &Inner, id: &SessionId, pending: Pending, stop: &Stop) -> Option<Ran> {
    let (lease, permit) = match main_slot(inner, id) {
        Ok(Some(taken)) => taken,
        Ok(None) => {
            pending.refuse(ApiFailure::Unavailable("loopd is shutting down".into()));
            return None;
        }
        Err(e) => {
            pending.refuse(ApiFailure::Internal(e.to_string()));
            return None;
        }
    };
    let no_shutdown_meanwhile = inner.starting.read().unwrap_or_else(|p| p.into_inner());
    if inner.shutting_down.load(Ordering::SeqCst) {
        pending.refuse(ApiFailure::Unavailable("loopd is shutting down".into()));
        return None;
    }
    if stop.is_set() {
        pending.refuse(ApiFailure::Unavailable(
            "cancelled before it started".into(),
        ));
        return None;
    }
    let mut session = match inner.idle.open(&inner.parts.store, id, true) {
        Ok(session) => session,
        Err(e) => {
            tracing::error!(session = %id, error = %e, "cannot open the session");
            pending.refuse(store_failure(e));
            return None;
        }
    };
    // A task its client named and submitted before: answered with that turn, never run twice.
    if let Some(answer) = pending
        .named
        .as_ref()
        .and_then(|t| t.answer_recorded(&session))
    {
        tracing::info!(session = %id, turn = answer.accepted.turn, "a task id seen before: answering its turn");
        let _ = pending.reply.send(Ok(answer));
        return None;
    }
    // A run into a session of its own, submitted again after a crash (`submit::queue_new`
    // let it through: named, into a session that exists): it goes only into a session that
    // holds no task, its own made just before the crash; never after another's.
    if pending.new_session
        && session
            .records()
            .iter()
            .any(|r| matches!(r, LogRecord::User { .. }))
    {
        pending.refuse(super::submit::made_before(id));
        return None;
    }
    // The day's budget was spent while this task waited for its turn.
    if let Some(why) = inner.day_refusal() {
        pending.refuse(why);
        return None;
    }
    let task_id = pending.named.as_ref().map(|t| t.task_id());
    let turn = match start_task(&mut session, &pending.text, task_id, &pending.overheard) {
        Ok(turn) => turn,
        Err(e) => {
            tracing::error!(session = %id, error = %e, "cannot record the task");
            pending.refuse(store_failure(e));
            return None;
        }
    };
    drop(no_shutdown_meanwhile);
    let (events, receiver) = mpsc::unbounded_channel();
    let accepted = TaskAccepted {
        session: id.clone(),
        turn,
        end: None,
    };
    if let Some(named) = &pending.named {
        named.accepted(&accepted);
    }
    // The submitter may be gone (a client that disconnected): the turn runs all the same.
    let _ = pending.reply.send(Ok(Submitted {
        accepted,
        events: receiver,
    }));
    // It waits no more: its place under `[api] max_waiting_tasks` goes to the next one.
    drop(pending.waiting);
    let feed = inner.lock_lanes().get(id).map(|lane| lane.feed());
    let parts = &inner.parts;
    let registry =
        crate::subagent::registry_for(&parts.tools.registry(id, &parts.blocking), id, &parts.cfg);
    let meter = parts.meter.task(id.clone(), &registry);
    let mut tally = meter.tally();
    let kv_endpoint = Arc::clone(&lease.target.endpoint);
    let mut on_event = |event: &TurnEvent| {
        // First: a budget reads the day's spending right after the event.
        tally.event(event);
        // The server's prefill speed: whether KV files pay for themselves there (`kv`).
        if let (
            Some(kv),
            TurnEvent::ModelDone {
                timings: Some(timings),
                ..
            },
        ) = (parts.models.kv(), event)
        {
            kv.prefilled(&kv_endpoint, timings);
        }
        if let Some(named) = &pending.named {
            named.event(event);
        }
        let _ = events.send(event.clone());
        if let Some(feed) = &feed {
            let _ = feed.send(event.clone());
        }
    };
    let place = crate::kv::Place {
        endpoint: Arc::clone(&lease.target.endpoint),
        slot: lease.target.slot,
    };
    // Only with `[kv]` on: the baseline's digest is not worked out for nothing.
    let occupant = parts.models.kv().map(|_| Occupant::of(&session));
    // The permit rides with the turn's owner: given back while a call waits for the owner's
    // approval (another session may use the slot meanwhile: the cache is brought back when
    // the turn takes it again), and on return.
    let owner = TurnOwner::new(
        &inner.approvals,
        lease.gate.clone(),
        permit,
        &parts.blocking,
        stop.clone(),
        pending.unattended,
    )
    .with_rewarm(|| warm_up(parts, &place, &lease, occupant.clone()))
    .parking_in(Arc::clone(&inner.ready));
    let models = parts.models.targets(&lease.target);
    let rt = runtime(parts, &models, &registry, &owner, &meter);
    warm_up(parts, &place, &lease, occupant.clone());
    let ran = unwind::catch("a turn", id, || {
        run_foreground(&rt, &mut session, stop, &mut on_event)
    });
    let result = match ran {
        Ok(result) => Some(result),
        Err(why) => {
            unwind::end_failed(&mut session, turn, &why, &mut on_event);
            None
        }
    };
    // The submitter's stream ends with the turn's `ended`, before the slot's save below.
    drop(events);
    // A turn stopped while it waited for the owner ends without its slot: another session
    // may be on it now, and its cache is not this session's to record or save.
    if owner.holds_slot() {
        after_turn(parts, &place, &lease, Occupant::of(&session));
    }
    // What the turn's events had not yet told the accounts. The main slot goes back first
    // (another session's turn need not wait for the write); then the turn's spending is made
    // durable: a crash loses at most a turn in flight.
    drop(tally);
    drop(owner);
    parts.meter.save_or_warn();
    let result = result?;
    if let Err(e) = &result {
        tracing::warn!(session = %id, turn, error = %e, "turn failed");
    }
    Some(Ran {
        session,
        registry,
        result,
        models,
    })
}

/// Before a turn at `place`: the slot's last session saved to its KV file when it was
/// another, and this session's file restored when it has one that matches (`kv`). What
/// fails is logged there; the turn then prefills as it always could.
fn warm_up(
    parts: &EngineParts,
    place: &crate::kv::Place,
    lease: &Lease,
    occupant: Option<Occupant>,
) {
    let (Some(kv), Some(occupant)) = (parts.models.kv(), occupant) else {
        return;
    };
    let session = occupant.session.clone();
    let warmed = parts.blocking.wait(async {
        Ok::<_, OnRuntimeThread>(kv.before_turn(place, &lease.target.client, occupant).await)
    });
    if let Ok(warmth) = warmed {
        tracing::debug!(%session, ?warmth, "the slot before the turn");
    }
}

/// After a turn, its slot still held: the slot holds the session as the turn left it, saved
/// to its file there when that is due (`kv::SlotFiles::after_turn`).
fn after_turn(parts: &EngineParts, place: &crate::kv::Place, lease: &Lease, occupant: Occupant) {
    let Some(kv) = parts.models.kv() else {
        return;
    };
    let saved = parts.blocking.wait(async {
        kv.after_turn(place, &lease.target.client, occupant).await;
        Ok::<_, OnRuntimeThread>(())
    });
    if let Err(e) = saved {
        tracing::warn!(error = %e, "cannot record the slot's holder after the turn");
    }
}

/// Waits for session `id`'s main slot. Its endpoint may be found down while the session
/// waits: then the slot is given back and the session routed again, at most
/// [`MAX_REROUTES`] times (the last slot is kept: its calls fail or are retried there).
/// `Ok(None)`: the gate was closed.
fn main_slot(
    inner: &Inner,
    id: &SessionId,
) -> Result<Option<(Lease, OwnedSemaphorePermit)>, OnRuntimeThread> {
    let mut tries = 0;
    loop {
        let lease = inner.parts.models.main_for(id);
        let gate = lease.gate.clone();
        let taken = inner
            .parts
            .blocking
            .wait(async { Ok::<_, OnRuntimeThread>(gate.acquire_owned().await.ok()) })?;
        let Some(permit) = taken else {
            return Ok(None);
        };
        tries += 1;
        if tries > MAX_REROUTES || inner.parts.models.still_fit(&lease.target) {
            return Ok(Some((lease, permit)));
        }
        tracing::info!(session = %id, endpoint = %lease.target.endpoint, "the endpoint went down while the session waited for its slot; routing it again");
    }
}

/// The background work after a turn (`finish_turn`), one session at a time on the background
/// slot, holding no main slot: a task of another session starts meanwhile. Skipped at shutdown.
fn background(inner: &Inner, id: &SessionId, mut ran: Ran) {
    if inner.shutting_down.load(Ordering::SeqCst) {
        return;
    }
    let lease = inner
        .parts
        .models
        .background_near(&ran.models.main.endpoint);
    let Some(_permit) = inner.permit(&lease) else {
        return;
    };
    if inner.shutting_down.load(Ordering::SeqCst) {
        return;
    }
    tracing::debug!(session = %id, "background work after the turn");
    // No tool runs after the turn: nothing there asks the owner.
    let meter = inner.parts.meter.task(id.clone(), &ran.registry);
    let mut models = ran.models.clone();
    models.background = lease.target;
    let rt = runtime(&inner.parts, &models, &ran.registry, &NoOwner, &meter);
    let epoch = ran.session.epoch();
    finish_turn(&rt, &mut ran.session, &ran.result);
    if ran.session.epoch() != epoch
        && let Some(kv) = inner.parts.models.kv()
    {
        // Compacted: the old epoch's cache is never restored again.
        kv.drop_session(id);
    }
    inner.parts.meter.save_or_warn();
    if !inner.shutting_down.load(Ordering::SeqCst) {
        inner.idle.keep(ran.session);
    }
}
