//! A compaction asked for through the API (`boxctl compact`), run by the session's worker in
//! its turn, so it never races a turn on the same log. It uses the background slot only, so
//! it does not wait for a main slot.

use super::{Inner, store_failure};
use crate::api::ApiFailure;
use crate::compact::{CompactError, compact_session};
use crate::route::Lease;
use crate::tools::Registry;
use crate::turn::Stop;
use bxcore::SessionId;
use proto::api::CompactAnswer;
use std::sync::atomic::Ordering;
use tokio::sync::oneshot;

/// Summaries, then a compaction of session `id`; answers `reply` with the new epoch.
pub fn run(
    inner: &Inner,
    id: &SessionId,
    reply: oneshot::Sender<Result<CompactAnswer, ApiFailure>>,
    stop: &Stop,
) {
    if stop.is_set() || inner.shutting_down.load(Ordering::SeqCst) {
        let _ = reply.send(Err(ApiFailure::Unavailable(
            "cancelled before it started".into(),
        )));
        return;
    }
    // Wait for a background slot like a turn's background work does.
    let lease = inner
        .parts
        .models
        .background_near(&inner.parts.models.home_of(id));
    let Some(_permit) = inner.permit(&lease) else {
        let _ = reply.send(Err(ApiFailure::Unavailable(
            "loopd is shutting down".into(),
        )));
        return;
    };
    let _ = reply.send(compact(inner, id, &lease));
}

fn compact(inner: &Inner, id: &SessionId, lease: &Lease) -> Result<CompactAnswer, ApiFailure> {
    let parts = &inner.parts;
    let mut session = inner
        .idle
        .open(&parts.store, id, false)
        .map_err(store_failure)?;
    // A compaction calls no tool and writes no baseline: the next turn does.
    let registry = Registry::new(Vec::new());
    let meter = parts.meter.task(id.clone(), &registry);
    let mut models = parts.models.targets(&lease.target);
    // Measuring the epoch counts tokens only: the background endpoint does it too.
    models.main = lease.target.clone();
    models.background = lease.target.clone();
    let rt = super::worker::runtime(parts, &models, &registry, &crate::turn::NoOwner, &meter);
    if let Err(e) = crate::summarise::missing(&rt, &mut session) {
        tracing::warn!(session = %id, error = %e, "tool summary");
    }
    let compacted = compact_session(&mut session, &rt);
    parts.meter.save_or_warn();
    if compacted.is_ok()
        && let Some(kv) = parts.models.kv()
    {
        // A new epoch: the old one's cache is never restored again.
        kv.drop_session(id);
    }
    match compacted {
        Ok(done) => Ok(CompactAnswer {
            session: id.clone(),
            epoch: done.epoch,
            model_failure: done.model_failure,
            carry_chars: done.carry_chars as u64,
            notes: done.notes as u64,
        }),
        Err(CompactError::Nothing) => Err(ApiFailure::BadRequest(format!(
            "session {id} has nothing to compact: epoch {} holds no messages yet",
            session.epoch()
        ))),
        Err(CompactError::Store(e)) => Err(store_failure(e)),
        Err(e) => Err(ApiFailure::Internal(format!(
            "cannot compact session {id}: {e}"
        ))),
    }
}
