//! `POST /v1/undo` and `GET /v1/diff?session=ID[&turn=N]`: undoing and showing what a
//! session's turns wrote (`crate::checkpoints`). loopd is the only caller: it turns the owner's
//! `boxctl undo` and `boxctl diff` into these, and records an undo in the session's log.

use super::routes::Body;
use crate::audit::AuditRecord;
use crate::broker::Broker;
use crate::builtin::files::undo;
use crate::checkpoints::diff;
use bxcore::SessionId;
use bxhttp::answer::{Problem, json};
use http::{Response, StatusCode};
use proto::api::error_kind;
use proto::{DiffAnswer, UndoAnswer, UndoRequest};
use std::sync::Arc;
use std::time::Instant;

/// The answer when writes are not recorded.
const NOT_RECORDED: &str = "brokerd records no writes ([checkpoints] enabled = false): there is \
                            nothing to undo or show";

/// `POST /v1/undo`.
pub(super) async fn undo(
    broker: Arc<Broker>,
    request: UndoRequest,
) -> Result<Response<Body>, Problem> {
    let Some(store) = broker.checkpoints().cloned() else {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            error_kind::CONFLICT,
            NOT_RECORDED,
        ));
    };
    let asked = request.clone();
    let started = Instant::now();
    let done = tokio::task::spawn_blocking(move || {
        // Checked first (a dry run), then audited, then done: an undo the audit log cannot
        // record changes nothing, as a call it cannot record does not run.
        let plan = undo::undo(&store, &asked.session, asked.from_turn, true)?;
        if asked.dry_run {
            return Ok(plan);
        }
        let line = AuditRecord::undo(&asked, plan.len(), started);
        if let Err(e) = broker.audit().append(&line) {
            tracing::error!(session = %asked.session, "{e}; the undo is not done");
            return Err(undo::UndoError::NotAudited(e.to_string()));
        }
        undo::undo(&store, &asked.session, asked.from_turn, false)
    })
    .await
    .map_err(|e| internal(format!("the undo's task failed: {e}")))?;
    match done {
        Ok(files) => {
            let mut turns: Vec<u64> = files.iter().map(|f| f.turn).collect();
            turns.sort_unstable();
            turns.dedup();
            Ok(json(
                StatusCode::OK,
                &UndoAnswer {
                    session: request.session,
                    turns,
                    files,
                    dry_run: request.dry_run,
                },
            ))
        }
        Err(e @ (undo::UndoError::ChangedSince { .. } | undo::UndoError::Lost { .. })) => Err(
            Problem::new(StatusCode::CONFLICT, error_kind::CONFLICT, e.to_string()),
        ),
        Err(e) => Err(internal(e.to_string())),
    }
}

/// `GET /v1/diff?session=ID[&turn=N]`.
pub(super) fn diff(broker: &Broker, query: Option<&str>) -> Result<Response<Body>, Problem> {
    let (session, turn) = diff_query(query)?;
    let Some(store) = broker.checkpoints() else {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            error_kind::CONFLICT,
            NOT_RECORDED,
        ));
    };
    let files = diff::diffs(store, &session, turn);
    Ok(json(StatusCode::OK, &DiffAnswer { session, files }))
}

/// `session=ID` and an optional `turn=N`; anything else is an error that says what.
fn diff_query(query: Option<&str>) -> Result<(SessionId, Option<u64>), Problem> {
    let (mut session, mut turn) = (None, None);
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("session", value)) => {
                session =
                    Some(SessionId::new(value).map_err(|e| {
                        Problem::bad_request(format!("query parameter session: {e}"))
                    })?);
            }
            Some(("turn", value)) => {
                turn = Some(value.parse::<u64>().map_err(|_| {
                    Problem::bad_request(format!(
                        "query parameter turn: {value:?} is not a turn number"
                    ))
                })?);
            }
            _ => {
                return Err(Problem::bad_request(format!(
                    "unknown query parameter {pair:?}; use session=ID and turn=N"
                )));
            }
        }
    }
    let session = session
        .ok_or_else(|| Problem::bad_request("the query parameter session=ID is required"))?;
    Ok((session, turn))
}

fn internal(message: String) -> Problem {
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        error_kind::INTERNAL,
        message,
    )
}
