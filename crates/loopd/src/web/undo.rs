//! The console's diff and undo of a session's turns (`docs/undo.md`, `docs/web.md`): a page of
//! what a turn changed, a confirmation page that shows what an undo would put back (brokerd's
//! dry run), and the POST that does it, with the CSRF token of the console's own origin like
//! every change. The form carries the session's last turn as the page saw it: an undo after
//! another turn ran would undo something the owner was not shown, so it is refused.

use super::pages;
use super::routes::{Ctx, blocking, session_id};
use crate::api::Backend;
use bxcore::SessionId;
use bxhttp::answer::Problem;
use http::StatusCode;
use maud::Markup;
use proto::api::error_kind;
use proto::{UndoAnswer, UndoTurns};
use std::collections::HashMap;

/// The number `name` of a query or form, when given.
fn number(
    pairs: impl Iterator<Item = (String, String)>,
    name: &str,
) -> Result<Option<u64>, Problem> {
    let mut found = None;
    for (key, value) in pairs {
        if key == name {
            let n = value.parse::<u64>().map_err(|_| {
                Problem::bad_request(format!("{name}={value:?} is not a turn number"))
            })?;
            found = Some(n);
        }
    }
    Ok(found)
}

fn query_number(query: Option<&str>, name: &str) -> Result<Option<u64>, Problem> {
    let pairs = form_urlencoded::parse(query.unwrap_or("").as_bytes()).into_owned();
    number(pairs, name)
}

/// Session `id`'s last turn.
async fn last_turn<B: Backend>(ctx: &Ctx<B>, id: &SessionId) -> Result<u64, Problem> {
    let list = blocking(&ctx.backend, |b| b.sessions()).await?;
    list.sessions
        .into_iter()
        .find(|s| &s.id == id)
        .map(|s| s.last_turn)
        .ok_or_else(|| {
            Problem::new(
                StatusCode::NOT_FOUND,
                error_kind::NOT_FOUND,
                format!("no session {id}"),
            )
        })
}

/// The undo of session `id`'s turns from `from` on (only what it would do, `dry_run`).
async fn undo_from<B: Backend>(
    ctx: &Ctx<B>,
    id: &SessionId,
    from: u64,
    dry_run: bool,
) -> Result<UndoAnswer, Problem> {
    let asked = UndoTurns {
        turns: 0,
        from_turn: Some(from),
        dry_run,
    };
    Ok(ctx.backend.undo(id, asked).await?)
}

/// `GET /sessions/ID/diff[?turn=N]`.
pub(super) async fn diff_page<B: Backend>(
    ctx: &Ctx<B>,
    raw: &str,
    query: Option<&str>,
    csrf: &str,
) -> Result<Markup, Problem> {
    let id = session_id(raw)?;
    let turn = query_number(query, "turn")?;
    let answer = blocking(&ctx.backend, move |b| b.diff(&id, turn)).await?;
    Ok(pages::diff(csrf, &answer, turn))
}

/// `GET /sessions/ID/undo?from=N`: brokerd's dry run, and the form.
pub(super) async fn confirm_page<B: Backend>(
    ctx: &Ctx<B>,
    raw: &str,
    query: Option<&str>,
    csrf: &str,
) -> Result<Markup, Problem> {
    let id = session_id(raw)?;
    let from = query_number(query, "from")?
        .ok_or_else(|| Problem::bad_request("say from which turn on: ?from=N"))?;
    let last = last_turn(ctx, &id).await?;
    let plan = undo_from(ctx, &id, from, true).await?;
    Ok(pages::confirm_undo(csrf, &plan, last))
}

/// `POST /sessions/ID/undo` (`from`, `last`): the undo, when the session's last turn is still
/// `last`; back to the session's page.
pub(super) async fn undo<B: Backend>(
    ctx: &Ctx<B>,
    raw: &str,
    form: &HashMap<String, String>,
) -> Result<String, Problem> {
    let id = session_id(raw)?;
    let field = |name: &str| {
        let pairs = form.iter().map(|(k, v)| (k.clone(), v.clone()));
        number(pairs, name)?.ok_or_else(|| Problem::bad_request(format!("the form has no {name}")))
    };
    let (from, shown_last) = (field("from")?, field("last")?);
    let last = last_turn(ctx, &id).await?;
    if last != shown_last {
        return Err(Problem::new(
            StatusCode::CONFLICT,
            error_kind::CONFLICT,
            format!(
                "session {id} has had turn {last} since the page you confirmed showed turn \
                 {shown_last} as its last: nothing was undone; look at the undo again"
            ),
        ));
    }
    let done = undo_from(ctx, &id, from, false).await?;
    tracing::info!(session = %id, from, files = done.files.len(), "web: turns undone");
    Ok(format!("/sessions/{id}"))
}
