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
    let from_turn = first_undone(id, asked, last, session.epoch_records())?;
    // The turns this undo takes out: those from `from_turn` on that are not undone already.
    let taken: Vec<u64> = kept_turns(session.epoch_records())
        .into_iter()
        .filter(|turn| *turn >= from_turn)
        .collect();
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
        turns: taken,
        ..answer
    })
}

/// The first turn whose user record is in the epoch's records.
/// The first turn `asked` undoes in session `id` (its last turn `last`, its current epoch's
/// records `epoch`): `from_turn`, or the `turns`-th last turn not undone yet. Only turns of the
/// current epoch: an earlier one is in its compaction's summary.
fn first_undone(
    id: &SessionId,
    asked: &UndoTurns,
    last: u64,
    epoch: &[LogRecord],
) -> Result<u64, ApiFailure> {
    let first_of_epoch = first_turn_of_epoch(epoch);
    let from_turn = match asked.from_turn {
        Some(_) if asked.turns != 0 => {
            return Err(ApiFailure::BadRequest(
                "give either \"turns\" (how many of the last turns) or \"from_turn\", not both"
                    .into(),
            ));
        }
        Some(from) if from == 0 || from > last => {
            return Err(ApiFailure::BadRequest(format!(
                "session {id} has turns 1 to {last}: there is no turn {from} to undo from"
            )));
        }
        Some(from) => from,
        None => {
            let kept = kept_turns(epoch);
            if kept.is_empty() {
                return Err(ApiFailure::BadRequest(format!(
                    "session {id} has no turn left to undo in its current epoch (the others are \
                     undone already, or in a compaction's summary)"
                )));
            }
            if asked.turns == 0 || asked.turns > kept.len() as u64 {
                return Err(ApiFailure::BadRequest(format!(
                    "session {id} has {} turn(s) in its current epoch that are not undone: undo \
                     1 to {} of them, not {} (earlier turns are undone already, or in a \
                     compaction's summary)",
                    kept.len(),
                    kept.len(),
                    asked.turns
                )));
            }
            kept[kept.len() - asked.turns as usize]
        }
    };
    if let Some(first) = first_of_epoch
        && first > from_turn
    {
        return Err(ApiFailure::BadRequest(format!(
            "turn {from_turn} of session {id} was compacted into a summary and cannot be taken \
             out of it: undo from turn {first} at the earliest"
        )));
    }
    Ok(from_turn)
}

/// The turns of `records` that are not undone, in order.
fn kept_turns(records: &[LogRecord]) -> Vec<u64> {
    crate::undone::kept(records)
        .filter_map(|r| match r {
            LogRecord::User { turn, .. } => Some(*turn),
            _ => None,
        })
        .collect()
}

fn first_turn_of_epoch(records: &[LogRecord]) -> Option<u64> {
    records.iter().find_map(|r| match r {
        LogRecord::User { turn, .. } => Some(*turn),
        _ => None,
    })
}
