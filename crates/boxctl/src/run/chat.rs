//! `boxctl chat`: a conversation in one session, a line of stdin at a time, each answer
//! streamed as `boxctl task` streams it and each approval asked inline.
//!
//! The lines are read through the prompt's one reader of stdin, so that the line after a
//! question answers it and the next one is the next message. A person at a terminal (stdin,
//! stdout and stderr terminals, no `--json`) types each message with line editing and the
//! chat's history (up-arrow recalls an earlier message; in memory only, see
//! [`crate::line_editor`]), read only while no turn runs; answers to inline questions stay
//! plain lines. A script's lines (stdin not a terminal) are plain lines, taken in order.

use super::failure::{Failure, report};
use super::task::{MAX_STDIN_TASK_BYTES, fresh_task_id, turn};
use crate::cli::EXIT_OK;
use crate::client::{Client, ClientError};
use crate::format::EventPrinter;
use crate::prompt::Prompt;
use bxcore::SessionId;
use proto::api::TaskRequest;
use std::io::{self, IsTerminal};

/// The line that ends the chat (as the end of stdin does).
pub const QUIT: &str = "/quit";

/// What one line read does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatLine {
    /// Send this text as a task.
    Send(String),
    /// Nothing to send (an empty line).
    Skip,
    /// Too long to send, in bytes.
    TooLong(usize),
    /// End the chat.
    Quit,
}

/// What `line` does: `/quit` ends, an empty line is skipped, the rest (without the white
/// space around it) is sent when it fits in `limit_bytes`.
pub fn chat_line(line: &str, limit_bytes: usize) -> ChatLine {
    let text = line.trim();
    if text == QUIT {
        ChatLine::Quit
    } else if text.is_empty() {
        ChatLine::Skip
    } else if text.len() > limit_bytes {
        ChatLine::TooLong(text.len())
    } else {
        ChatLine::Send(text.to_string())
    }
}

/// Whether a failure of one turn ends the chat: a loopd that is gone or stuck, an unknown
/// session, or a local failure. A refusal of one task (busy, a budget) does not.
fn ends_chat(failure: &Failure) -> bool {
    !matches!(
        failure,
        Failure::Client(ClientError::Api { status, .. }) if *status != 404
    )
}

/// `boxctl chat`: asks loopd's status first (so that a loopd that is not there is said at
/// once), then reads lines until `/quit` or the end of stdin; 0 then, or the exit code of the
/// failure that ended it.
pub(super) async fn chat(
    client: &Client,
    json: bool,
    mut session: Option<SessionId>,
    reasoning: bool,
) -> Result<u8, Failure> {
    // Is loopd there? Better said before the owner types than after.
    client.status().await?;
    let person = io::stdin().is_terminal() && !json;
    // The editor draws on stdout (the answers' stream): only when it is the terminal too.
    let editing = person && io::stdout().is_terminal() && io::stderr().is_terminal();
    let mut printer = EventPrinter::new(reasoning, crate::colour::stdout_colour());
    let mut prompt = Some(Prompt::chat(editing));
    if person {
        let place = match &session {
            Some(id) => format!("session {id}"),
            None => "a new session".to_string(),
        };
        let ends = match editing {
            true => "Ctrl-D or Ctrl-C at the prompt",
            false => "Ctrl-D",
        };
        eprintln!("boxctl: chatting in {place}; {QUIT} or {ends} ends");
    }
    // Always `Some`: an `Option` as `turn` takes it.
    while let Some(reader) = prompt.as_mut() {
        let Some(line) = reader.read_message(if person { "> " } else { "" }).await else {
            break;
        };
        let text = match chat_line(&line, MAX_STDIN_TASK_BYTES) {
            ChatLine::Quit => break,
            ChatLine::Skip => continue,
            ChatLine::TooLong(bytes) => {
                reader.say(&format!(
                    "boxctl: that line is {bytes} bytes long; the limit is \
                     {MAX_STDIN_TASK_BYTES}; not sent\n"
                ));
                continue;
            }
            ChatLine::Send(text) => text,
        };
        let task = TaskRequest {
            session: session.clone(),
            text,
            task_id: Some(fresh_task_id().map_err(Failure::Local)?),
            overheard: Vec::new(),
        };
        match turn(client, json, task, &mut printer, &mut prompt).await {
            Ok((_, ran_in)) => session = session.or(ran_in),
            Err(failure) if ends_chat(&failure) => return Err(failure),
            Err(failure) => {
                report(&failure, json);
            }
        }
    }
    Ok(EXIT_OK)
}
