//! `boxctl task`: one turn submitted and its events streamed (shared with `boxctl chat`), and
//! `task -`'s text read from stdin.

use super::failure::Failure;
use super::{comment, out, out_line, stream_ended};
use crate::cli::{EXIT_BUDGET, EXIT_FAILED, EXIT_OK};
use crate::client::{Client, ClientError, EventStream, StreamItem};
use crate::format::{EventPrinter, end_message};
use crate::prompt::Prompt;
use bxcore::{SessionId, TaskId, TurnEnd, TurnEvent};
use proto::api::TaskRequest;
use std::io::{self, Read};

/// The most `boxctl task -` reads from stdin, in bytes: half of loopd's default request body
/// limit (`api.max_body_bytes`, 1 MiB), so that the text still fits once written as JSON.
pub const MAX_STDIN_TASK_BYTES: usize = 512 * 1024;

/// Why `task -` found no task on stdin.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StdinTextError {
    /// Nothing but white space came.
    #[error("the task text on stdin is empty")]
    Empty,
    /// More than the limit came.
    #[error("the task text on stdin is longer than {limit_bytes} bytes (the limit)")]
    TooLong {
        /// The limit, in bytes.
        limit_bytes: usize,
    },
    /// What came is not UTF-8.
    #[error("the task text on stdin is not UTF-8 (from byte {at_byte})")]
    NotUtf8 {
        /// Where the first bad byte is.
        at_byte: usize,
    },
    /// Stdin could not be read.
    #[error("cannot read the task text from stdin: {0}")]
    Read(String),
}

/// A task's text from `input`: at most `limit_bytes` of UTF-8, without the white space it ends
/// with (the newline a shell or a file leaves), not empty.
pub fn read_task_text(input: impl Read, limit_bytes: usize) -> Result<String, StdinTextError> {
    let mut bytes = Vec::new();
    let allowed = u64::try_from(limit_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    input
        .take(allowed)
        .read_to_end(&mut bytes)
        .map_err(|e| StdinTextError::Read(e.to_string()))?;
    if bytes.len() > limit_bytes {
        return Err(StdinTextError::TooLong { limit_bytes });
    }
    let text = String::from_utf8(bytes).map_err(|e| StdinTextError::NotUtf8 {
        at_byte: e.utf8_error().valid_up_to(),
    })?;
    let text = text.trim_end();
    if text.trim_start().is_empty() {
        return Err(StdinTextError::Empty);
    }
    Ok(text.to_string())
}

/// A new task id: the time and 64 random bits, so that no two `boxctl task` share one.
pub fn fresh_task_id() -> Result<TaskId, String> {
    let random = getrandom::u64().map_err(|e| format!("no random numbers for a task id: {e}"))?;
    let now = bxcore::Timestamp::now().unix_seconds();
    TaskId::new(&format!("{now}-{random:016x}")).map_err(|e| e.to_string())
}

/// `boxctl task`: `words` joined, or stdin's text when they are `-` alone (then nothing is
/// asked at the prompt: stdin is spent).
pub(super) async fn task(
    client: &Client,
    json: bool,
    session: Option<SessionId>,
    task_id: Option<TaskId>,
    words: Vec<String>,
    reasoning: bool,
) -> Result<u8, Failure> {
    let from_stdin = words.len() == 1 && words[0] == "-";
    let text = match from_stdin {
        true => read_task_text(io::stdin().lock(), MAX_STDIN_TASK_BYTES)
            .map_err(|e| Failure::Usage(e.to_string()))?,
        false => words.join(" "),
    };
    let task = TaskRequest {
        session,
        text,
        task_id,
        overheard: Vec::new(),
    };
    let mut printer = EventPrinter::new(reasoning, crate::colour::stdout_colour());
    let mut prompt = match from_stdin {
        true => None,
        false => Prompt::terminal(),
    };
    let (code, _) = turn(client, json, task, &mut printer, &mut prompt).await?;
    Ok(code)
}

/// Submits `task` (named now when it has no id) and streams its turn through `printer`,
/// asking at `prompt`; the turn's exit code and the session it ran in. Without a session,
/// which one it got is said on stderr.
pub(super) async fn turn(
    client: &Client,
    json: bool,
    mut task: TaskRequest,
    printer: &mut EventPrinter,
    prompt: &mut Option<Prompt>,
) -> Result<(u8, Option<SessionId>), Failure> {
    let new_session = task.session.is_none();
    if task.task_id.is_none() {
        task.task_id = Some(fresh_task_id().map_err(Failure::Local)?);
    }
    let mut ran_in = task.session.clone();
    let mut stream = client.submit_stream(&task).await?;
    while let Some(item) = next_item(client, &mut stream, prompt).await? {
        let (event, raw) = match item {
            StreamItem::Event { event, raw } => (event, raw),
            StreamItem::Comment(text) => {
                comment(&text);
                continue;
            }
        };
        if let TurnEvent::Started { session, turn } = &event {
            if new_session {
                eprintln!("boxctl: session {session}, turn {turn}");
            }
            ran_in = Some(session.clone());
        }
        if json {
            out_line(&raw)?;
            if let TurnEvent::Ended { end, .. } = &event
                && let Some(why) = end_message(end)
            {
                eprintln!("boxctl: {why}");
            }
        } else {
            let printed = printer.print(&event);
            out(&printed.out)?;
            eprint!("{}", printed.err);
        }
        if let Some(prompt) = prompt {
            prompt.event(client, &event).await;
        }
        if let TurnEvent::Ended { end, .. } = event {
            let code = match end {
                TurnEnd::Done => EXIT_OK,
                TurnEnd::Budget { .. } => EXIT_BUDGET,
                _ => EXIT_FAILED,
            };
            return Ok((code, ran_in));
        }
    }
    out(&printer.finish())?;
    Err(stream_ended(client, "before the turn ended").into())
}

/// The next item of `stream`; with a prompt, answers typed while it waits are posted.
pub(super) async fn next_item(
    client: &Client,
    stream: &mut EventStream,
    prompt: &mut Option<Prompt>,
) -> Result<Option<StreamItem>, ClientError> {
    match prompt {
        Some(prompt) => prompt.next(client, stream).await,
        None => stream.next().await,
    }
}
