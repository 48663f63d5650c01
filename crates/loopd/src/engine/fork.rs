//! A fork asked for through the API (`boxctl fork SESSION [--at TURN] [--as NEW]`), run by the
//! source session's worker in its turn, so the log it copies is not being written: a new
//! session whose log starts as a copy of the source's records up to the end of turn `at`,
//! labels and epochs included (its context label is the source's at that point), and then a
//! note that says where it came from. Files are not forked. The source's KV file is given to
//! the fork (`kv::SlotFiles::copy_for_fork`), so its first turn evaluates only its new tokens
//! when the file holds the conversation up to the cut (or more of it: the server reuses the
//! common prefix); a file of a later epoch than the cut is refused at restore, and the fork
//! prefills.

use super::lane::Work;
use super::{Engine, Inner, store_failure};
use crate::api::ApiFailure;
use bxcore::{LogRecord, SessionId, Timestamp};
use proto::{ForkAnswer, ForkRequest};
use tokio::sync::oneshot;

/// Queues the fork of session `id` behind its tasks, and waits for it.
pub(super) async fn ask(
    engine: &Engine,
    id: &SessionId,
    asked: ForkRequest,
) -> Result<ForkAnswer, ApiFailure> {
    engine.inner.known(id)?;
    let new = match &asked.new_session {
        Some(new) => new.clone(),
        None => engine.new_session_id()?,
    };
    let (reply, answer) = oneshot::channel();
    engine.queue(id, Work::Fork(asked, new, reply))?;
    answer
        .await
        .map_err(|_| ApiFailure::Internal("the fork was dropped before it ran".into()))?
}

/// The fork of session `id` into `new` as `asked` says; answers `reply`.
pub fn run(
    inner: &Inner,
    id: &SessionId,
    (asked, new): (&ForkRequest, &SessionId),
    reply: oneshot::Sender<Result<ForkAnswer, ApiFailure>>,
) {
    let _ = reply.send(fork(inner, id, asked, new));
}

fn fork(
    inner: &Inner,
    id: &SessionId,
    asked: &ForkRequest,
    new: &SessionId,
) -> Result<ForkAnswer, ApiFailure> {
    let parts = &inner.parts;
    let source = inner
        .idle
        .open(&parts.store, id, false)
        .map_err(store_failure)?;
    let records = source.records();
    let ended: Vec<(usize, u64)> = records
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r {
            LogRecord::TurnEnd { turn, .. } => Some((i, *turn)),
            _ => None,
        })
        .collect();
    let last_ended = ended.last().map_or(0, |(_, turn)| *turn);
    let at = asked.at.unwrap_or(last_ended);
    let Some(&(end_at, _)) = ended.iter().find(|(_, turn)| *turn == at) else {
        return Err(ApiFailure::BadRequest(format!(
            "session {id} has no ended turn {at} to fork at (its last ended turn is {last_ended})"
        )));
    };
    if parts.store.exists(new) {
        return Err(ApiFailure::BadRequest(format!(
            "session {new} exists already: fork into a new id"
        )));
    }
    let mut fork = parts.store.create(new).map_err(store_failure)?;
    // Every record after the header, one sync for all (the note's).
    let copied = &records[1..=end_at];
    for record in copied {
        fork.append_synced_with_next(record.clone())
            .map_err(store_failure)?;
    }
    fork.append(LogRecord::Note {
        time: Timestamp::now(),
        text: format!("forked from session {id} at turn {at}"),
    })
    .map_err(store_failure)?;
    let kv_copied = parts
        .models
        .kv()
        .is_some_and(|kv| kv.copy_for_fork(id, new));
    tracing::info!(from = %id, session = %new, at, kv_copied, "session forked");
    Ok(ForkAnswer {
        session: new.clone(),
        from: id.clone(),
        at,
        records: copied.len() as u64,
        kv_copied,
    })
}
