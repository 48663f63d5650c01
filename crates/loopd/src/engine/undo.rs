//! An undo asked for through the API (`boxctl undo SESSION [--turns N] [--dry-run]`), run by the
//! session's worker in its turn, so it never races a turn: brokerd puts back what the last
//! turns wrote (`docs/undo.md`), then an `undone` record leaves those turns out of the model's
//! next context. The session's KV file stays: its prefix is the conversation before them.
//!
//! Only turns of the current epoch can be undone: an earlier one is in the carry, which cannot
//! be taken apart. brokerd changes nothing when a file was changed since; a crash after brokerd
//! put the files back and before the record leaves the turns in the context, with their files
//! back: the owner runs the undo again, which finds nothing left to put back and writes the
//! record.

use super::lane::Work;
use super::{Engine, Inner, store_failure};
use crate::api::ApiFailure;
use crate::tools::PortRefusal;
use bxcore::{LogRecord, SessionId, Timestamp};
use proto::{DiffAnswer, UndoAnswer, UndoRequest, UndoTurns};
use std::sync::Arc;
use tokio::sync::oneshot;

/// Queues the undo of `asked` behind session `id`'s tasks, and waits for it.
pub(super) async fn ask(
    engine: &Engine,
    id: &SessionId,
    asked: UndoTurns,
) -> Result<UndoAnswer, ApiFailure> {
    engine.inner.known(id)?;
    let (reply, answer) = oneshot::channel();
    engine.queue(id, Work::Undo(asked, reply))?;
    answer
        .await
        .map_err(|_| ApiFailure::Internal("the undo was dropped before it ran".into()))?
}

/// What session `id`'s turns wrote, from brokerd.
pub(super) fn diff(
    engine: &Engine,
    id: &SessionId,
    turn: Option<u64>,
) -> Result<DiffAnswer, ApiFailure> {
    engine.inner.known(id)?;
    // The port waits for brokerd with `Blocking`, which only a thread outside the async
    // runtime may do (the API's blocking pool is inside it), as turn threads are.
    let port = Arc::clone(&engine.inner.parts.port);
    let session = id.clone();
    let asked = std::thread::spawn(move || port.diff(&session, turn));
    let answer = asked
        .join()
        .map_err(|_| ApiFailure::Internal("the diff's thread failed".into()))?;
    answer.map_err(|refusal| match refusal {
        PortRefusal::Unavailable(why) => ApiFailure::Unavailable(why),
        other => ApiFailure::Conflict(other.to_string()),
    })
}

/// The undo of `asked` in session `id`; answers `reply`.
pub fn run(
    inner: &Inner,
    id: &SessionId,
    asked: &UndoTurns,
    reply: oneshot::Sender<Result<UndoAnswer, ApiFailure>>,
) {
    let _ = reply.send(undo(inner, id, asked));
}

fn undo(inner: &Inner, id: &SessionId, asked: &UndoTurns) -> Result<UndoAnswer, ApiFailure> {
    let parts = &inner.parts;
    let mut session = inner
        .idle
        .open(&parts.store, id, false)
        .map_err(store_failure)?;
    let last = session.last_turn();
    if asked.turns == 0 || asked.turns > last {
        return Err(ApiFailure::BadRequest(format!(
            "session {id} has {last} turn(s): undo 1 to {last} of them, not {}",
            asked.turns
        )));
    }
    let from_turn = last - asked.turns + 1;
    if let Some(first) = first_turn_of_epoch(session.epoch_records())
        && first > from_turn
    {
        return Err(ApiFailure::BadRequest(format!(
            "turn {from_turn} of session {id} was compacted into epoch {}'s summary and cannot \
             be taken out of it: undo at most {} turn(s)",
            session.epoch(),
            last + 1 - first
        )));
    }
    let request = UndoRequest {
        session: id.clone(),
        from_turn,
        dry_run: asked.dry_run,
    };
    let answer = parts.port.undo(&request).map_err(|refusal| match refusal {
        PortRefusal::Conflict(why) => ApiFailure::Conflict(why),
        PortRefusal::NotRecorded => ApiFailure::Conflict(refusal.to_string()),
        PortRefusal::Unavailable(why) => ApiFailure::Unavailable(format!("brokerd: {why}")),
    })?;
    if !asked.dry_run {
        session
            .append(LogRecord::Undone {
                time: Timestamp::now(),
                from_turn,
                to_turn: last,
                files: answer.files.len() as u64,
            })
            .map_err(store_failure)?;
        // The session's KV file is kept: it holds the conversation before the undone turns as
        // its prefix, which is what the next prompt starts with, and llama-server reuses only
        // the common prefix of a cache and a prompt (`kv`), so the undone turns' tokens cost
        // nothing and are never answered from.
        tracing::info!(session = %id, from_turn, to_turn = last, files = answer.files.len(), "turns undone");
    }
    Ok(UndoAnswer {
        turns: (from_turn..=last).collect(),
        ..answer
    })
}

/// The first turn whose user record is in the epoch's records.
fn first_turn_of_epoch(records: &[LogRecord]) -> Option<u64> {
    records.iter().find_map(|r| match r {
        LogRecord::User { turn, .. } => Some(*turn),
        _ => None,
    })
}
