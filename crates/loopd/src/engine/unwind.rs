//! A turn thread that panics (a bug anywhere under a turn: a tool port, the model client, the
//! store) must not take its session with it: the turn ends as `failed` (recorded when the log
//! can still be written, and sent as its `ended` event), and the thread gives back its main
//! slot and its lane, so the session takes its next task. Without this a panic left the lane
//! marked running for good and every later task of the session waited forever.

use crate::session::Session;
use bxcore::{LogRecord, SessionId, Timestamp, TurnEnd, TurnEvent};
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs `work`; a panic in it is logged (as `what` of `session`) and returned as its message.
///
/// Unwind safety: what `work` borrows is either dropped by the caller after a panic (a
/// session is reopened, and checked, by the next task) or only used to record the failure.
pub fn catch<T>(what: &str, session: &SessionId, work: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(work)).map_err(|payload| {
        let message = message(payload.as_ref());
        tracing::error!(%session, "{what} panicked: {message}");
        message
    })
}

/// What a panic said.
fn message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_string()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Ends turn `turn` of `session` as failed after a panic that said `why`: a turn end in the log
/// when the turn is still open there and the log takes it, then the `ended` event.
pub fn end_failed(
    session: &mut Session,
    turn: u64,
    why: &str,
    on_event: &mut dyn FnMut(&TurnEvent),
) {
    let end = TurnEnd::Failed {
        reason: format!("loopd failed inside the turn (a bug): {why}"),
    };
    if session.open_turn() == Some(turn) {
        let record = LogRecord::TurnEnd {
            time: Timestamp::now(),
            turn,
            end: end.clone(),
        };
        if let Err(e) = session.append(record) {
            // The next open of the session ends the turn as interrupted instead.
            tracing::error!(session = %session.id(), turn, error = %e, "cannot record the end of a failed turn");
        }
    }
    on_event(&TurnEvent::Ended {
        turn,
        end,
        context: crate::baseline::context_labels(session),
    });
}
