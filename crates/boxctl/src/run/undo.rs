//! `boxctl undo` and `boxctl diff`: what a session's turns wrote, put back or shown; and
//! `boxctl fork`, a new session from one's conversation (`docs/undo.md`).

use super::failure::Failure;
use super::{out, out_line};
use crate::cli::EXIT_OK;
use crate::client::Client;
use crate::safe_text::terminal_safe;
use bxcore::SessionId;
use proto::{ForkRequest, UndoAnswer, UndoTurns};

/// `boxctl undo ID [--turns N] [--dry-run]`.
pub async fn undo(
    client: &Client,
    json: bool,
    id: &SessionId,
    asked: UndoTurns,
) -> Result<u8, Failure> {
    let answer = client.undo(id, &asked).await?;
    if json {
        out_line(&answer.raw)?;
    } else {
        out(&undo_text(&answer.value))?;
    }
    Ok(EXIT_OK)
}

/// `boxctl diff ID [--turn N]`.
pub async fn diff(
    client: &Client,
    json: bool,
    id: &SessionId,
    turn: Option<u64>,
) -> Result<u8, Failure> {
    let answer = client.diff(id, turn).await?;
    if json {
        out_line(&answer.raw)?;
        return Ok(EXIT_OK);
    }
    if answer.value.files.is_empty() {
        out_line("no write of these turns is kept")?;
    }
    for file in &answer.value.files {
        out_line(&format!("# turn {}", file.turn))?;
        out(&terminal_safe(&file.diff))?;
    }
    Ok(EXIT_OK)
}

/// `boxctl fork ID [--at TURN] [--as NEW]`.
pub async fn fork(
    client: &Client,
    json: bool,
    id: &SessionId,
    asked: ForkRequest,
) -> Result<u8, Failure> {
    let answer = client.fork(id, &asked).await?;
    if json {
        out_line(&answer.raw)?;
    } else {
        let made = &answer.value;
        let kv = if made.kv_copied {
            ", with its KV file"
        } else {
            ""
        };
        out_line(&format!(
            "forked {} at turn {} into {} ({} records copied{kv})",
            made.from, made.at, made.session, made.records
        ))?;
        out_line("files are not forked: both sessions see and change the same files")?;
    }
    Ok(EXIT_OK)
}

/// What an undo did, or would do, one line per file.
pub fn undo_text(answer: &UndoAnswer) -> String {
    let (first, last) = (answer.turns.first(), answer.turns.last());
    let turns = match (first, last) {
        (Some(first), Some(last)) if first != last => format!("turns {first} to {last}"),
        (Some(turn), _) => format!("turn {turn}"),
        _ => "no turn".to_owned(),
    };
    let mut text = if answer.dry_run {
        format!("undoing {turns} of {} would put back:\n", answer.session)
    } else {
        format!("undid {turns} of {}:\n", answer.session)
    };
    if answer.files.is_empty() {
        text.push_str("  (no file: those turns wrote none that is kept)\n");
    }
    for file in &answer.files {
        let what = if file.removed { "remove" } else { "restore" };
        let path = terminal_safe(&file.path.display().to_string()).into_owned();
        text.push_str(&format!("  {what} {path} (turn {})\n", file.turn));
    }
    text
}
