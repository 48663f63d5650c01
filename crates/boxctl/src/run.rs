//! Carrying out a command: requests to loopd, what is printed, and the exit code.

use crate::answers::{cancel_text, sessions_table, status_text};
use crate::cli::{Cli, Command, EXIT_OK};
use crate::client::{Client, ClientError, EventStream, StreamItem};
use crate::format::EventPrinter;
use crate::prompt::Prompt;
use crate::records::record_lines;
use bxcore::{ApprovalId, SessionId, TurnEvent};
use failure::Failure;
use proto::api::{ApprovalAnswer, OwnerAnswer, SSE_PING_COMMENT};
use std::io::{self, Write};
use task::next_item;

mod chat;
pub mod failure;
mod generate;
mod schedules;
mod task;
mod undo;
mod web;

pub use chat::{ChatLine, QUIT, chat_line};
pub use failure::{exit_code, json_requested, usage_error_json};
pub use generate::write_manpages;
pub use task::{MAX_STDIN_TASK_BYTES, StdinTextError, fresh_task_id, read_task_text};

/// Writes `text` to stdout now.
fn out(text: &str) -> io::Result<()> {
    if text.is_empty() {
        return Ok(());
    }
    let mut stdout = io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()
}

fn out_line(text: &str) -> io::Result<()> {
    out(&format!("{text}\n"))
}

/// Runs `cli`'s command; the process's exit code. Errors are printed on stderr, one line;
/// with `--json`, also as one JSON object on stdout ([`failure`]).
pub async fn run(cli: Cli) -> u8 {
    let client = Client::with_timeouts(&cli.socket, cli.timeouts());
    let json = cli.json;
    let result = match cli.command {
        Command::Task {
            session,
            reasoning,
            task_id,
            text,
        } => task::task(&client, json, session, task_id, text, reasoning).await,
        Command::Chat { session, reasoning } => chat::chat(&client, json, session, reasoning).await,
        Command::Sessions => sessions(&client, json).await,
        Command::Show {
            id,
            follow,
            reasoning,
        } => show(&client, json, &id, follow, reasoning).await,
        Command::Cancel { id } => cancel(&client, json, &id).await,
        Command::Compact { id } => compact(&client, json, &id).await,
        Command::Undo { id, turns, dry_run } => {
            undo::undo(
                &client,
                json,
                &id,
                proto::UndoTurns {
                    turns,
                    from_turn: None,
                    dry_run,
                },
            )
            .await
        }
        Command::Diff { id, turn } => undo::diff(&client, json, &id, turn).await,
        Command::Fork {
            id,
            at,
            new_session,
        } => undo::fork(&client, json, &id, proto::ForkRequest { at, new_session }).await,
        Command::Status => status(&client, json).await,
        Command::Memory => memory(&client, json).await,
        Command::Notifications => notifications(&client, json).await,
        Command::Summaries { id } => summaries(&client, json, &id).await,
        Command::Approvals => approvals(&client, json).await,
        Command::Approve { id, for_turn } => {
            let answer = match for_turn {
                true => OwnerAnswer::ApproveForTurn,
                false => OwnerAnswer::Approve,
            };
            let answer = ApprovalAnswer {
                answer,
                reason: None,
            };
            answer_approval(&client, json, id, answer).await
        }
        Command::Deny { id, reason } => {
            let answer = ApprovalAnswer {
                answer: OwnerAnswer::Deny,
                reason,
            };
            answer_approval(&client, json, id, answer).await
        }
        Command::Schedules => schedules::schedules(&client, json).await,
        Command::Schedule { action } => schedules::schedule(&client, json, action).await,
        Command::Usage { session, day } => usage(&client, json, session, day).await,
        Command::Web { revoke } => web::web(&client, json, revoke).await,
        Command::Completions { shell } => generate::completions(shell),
        Command::Manpages { dir } => generate::manpages(&dir),
    };
    match result {
        Ok(code) => code,
        Err(failure) => failure::report(&failure, json),
    }
}

/// A comment from loopd: pings mean nothing to people; anything else goes to stderr.
fn comment(text: &str) {
    if text != SSE_PING_COMMENT {
        eprintln!("boxctl: loopd: {text}");
    }
}

fn stream_ended(client: &Client, what: &str) -> ClientError {
    ClientError::Lost {
        socket: client.socket().to_path_buf(),
        reason: format!("loopd ended the event stream {what}"),
    }
}

/// `boxctl usage`: the table, or loopd's report as it came with `--json`. An unknown session
/// is a 404: exit 4.
async fn usage(
    client: &Client,
    json: bool,
    session: Option<SessionId>,
    day: Option<String>,
) -> Result<u8, Failure> {
    let answer = client.usage(session.as_ref(), day.as_deref()).await?;
    if json {
        out_line(&answer.raw)?;
    } else {
        out(&crate::usage::usage_table(&answer.value))?;
    }
    Ok(EXIT_OK)
}

async fn sessions(client: &Client, json: bool) -> Result<u8, Failure> {
    let answer = client.sessions().await?;
    if json {
        out_line(&answer.raw)?;
    } else {
        out(&sessions_table(&answer.value))?;
    }
    Ok(EXIT_OK)
}

async fn show(
    client: &Client,
    json: bool,
    id: &SessionId,
    follow: bool,
    reasoning: bool,
) -> Result<u8, Failure> {
    // Subscribe first, so that nothing between the last page and the stream is missed.
    let stream = match follow {
        true => Some(client.follow(id).await?),
        false => None,
    };
    let mut from = 0;
    loop {
        let page = client.records(id, from, None).await?;
        if json {
            out_line(&page.raw)?;
        } else {
            for record in &page.value.records {
                for line in record_lines(record, reasoning) {
                    out_line(&line)?;
                }
            }
        }
        match page.value.next {
            None => {
                if !json
                    && let Some(line) =
                        crate::listing::children_line(id, &client.sessions().await?.value)
                {
                    out_line(&line)?;
                }
                break;
            }
            Some(next) if next > from => from = next,
            Some(next) => {
                let why = format!("the page from record {from} says the next starts at {next}");
                return Err(ClientError::Protocol(why).into());
            }
        }
    }
    match stream {
        Some(stream) => follow_events(client, json, id, stream, reasoning).await,
        None => Ok(EXIT_OK),
    }
}

async fn follow_events(
    client: &Client,
    json: bool,
    id: &SessionId,
    mut stream: EventStream,
    reasoning: bool,
) -> Result<u8, Failure> {
    if !json {
        eprintln!("boxctl: following {id}; Ctrl-C stops");
    }
    let mut printer = EventPrinter::new(reasoning, crate::colour::stdout_colour());
    let mut prompt = Prompt::terminal();
    while let Some(item) = next_item(client, &mut stream, &mut prompt).await? {
        let (event, raw) = match item {
            StreamItem::Comment(text) => {
                comment(&text);
                continue;
            }
            StreamItem::Event { event, raw } => (event, raw),
        };
        if json {
            out_line(&raw)?;
        } else {
            if let TurnEvent::Started { turn, .. } = &event {
                out(&format!("{}── turn {turn}\n", printer.finish()))?;
            }
            let printed = printer.print(&event);
            out(&printed.out)?;
            eprint!("{}", printed.err);
        }
        if let Some(prompt) = &mut prompt {
            prompt.event(client, &event).await;
        }
    }
    out(&printer.finish())?;
    Err(stream_ended(client, "(loopd stopped?)").into())
}

async fn cancel(client: &Client, json: bool, id: &SessionId) -> Result<u8, Failure> {
    let answer = client.cancel(id).await?;
    if json {
        out_line(&answer.raw)?;
    } else {
        out(&cancel_text(&answer.value))?;
    }
    Ok(EXIT_OK)
}

async fn compact(client: &Client, json: bool, id: &SessionId) -> Result<u8, Failure> {
    let answer = client.compact(id).await?;
    if json {
        out_line(&answer.raw)?;
    } else {
        out_line(&crate::listing::compact_line(&answer.value))?;
    }
    Ok(EXIT_OK)
}

async fn status(client: &Client, json: bool) -> Result<u8, Failure> {
    let answer = client.status().await?;
    if json {
        out_line(&answer.raw)?;
    } else {
        out(&status_text(&answer.value))?;
    }
    Ok(EXIT_OK)
}

async fn memory(client: &Client, json: bool) -> Result<u8, Failure> {
    let answer = client.memory().await?;
    if json {
        out_line(&answer.raw)?;
    } else if answer.value.notes.is_empty() {
        out_line("no memory notes")?;
    } else {
        for note in &answer.value.notes {
            out_line(&crate::listing::memory_line(note))?;
        }
    }
    Ok(EXIT_OK)
}

async fn notifications(client: &Client, json: bool) -> Result<u8, Failure> {
    let answer = client.notifications().await?;
    if json {
        out_line(&answer.raw)?;
    } else if answer.value.notifications.is_empty() {
        out_line("no notifications")?;
    } else {
        for notification in &answer.value.notifications {
            out_line(&crate::listing::notification_line(notification))?;
        }
    }
    Ok(EXIT_OK)
}

/// Every tool summary and epoch carry of session `id`, read page by page; a line saying so
/// when there are none (nothing with `--json`).
async fn summaries(client: &Client, json: bool, id: &SessionId) -> Result<u8, Failure> {
    let mut from = 0;
    let mut found = false;
    loop {
        let page = client.records(id, from, None).await?;
        for record in page
            .value
            .records
            .iter()
            .filter(|r| crate::listing::is_summary(r))
        {
            found = true;
            if json {
                let raw = serde_json::to_string(record)
                    .map_err(|e| ClientError::Protocol(format!("cannot serialise: {e}")))?;
                out_line(&raw)?;
            } else if let Some(line) = crate::listing::summary_line(record) {
                out_line(&line)?;
            }
        }
        match page.value.next {
            None if found || json => return Ok(EXIT_OK),
            None => {
                out_line(&format!("no summaries or carries in {id}"))?;
                return Ok(EXIT_OK);
            }
            Some(next) if next > from => from = next,
            Some(next) => {
                let why = format!("the page from record {from} says the next starts at {next}");
                return Err(ClientError::Protocol(why).into());
            }
        }
    }
}

async fn approvals(client: &Client, json: bool) -> Result<u8, Failure> {
    let answer = client.approvals().await?;
    if json {
        out_line(&answer.raw)?;
    } else {
        let now = bxcore::Timestamp::now();
        out(&crate::approvals::approvals_table(&answer.value, &now))?;
    }
    Ok(EXIT_OK)
}

async fn answer_approval(
    client: &Client,
    json: bool,
    id: ApprovalId,
    answer: ApprovalAnswer,
) -> Result<u8, Failure> {
    let answered = match client.answer_approval(&id, &answer).await {
        Ok(answered) => answered,
        Err(e @ ClientError::Api { status: 404, .. }) => return Err(Failure::NoApproval(id, e)),
        Err(e) => return Err(e.into()),
    };
    if json {
        out_line(&answered.raw)?;
    } else {
        out_line(&crate::approvals::answered_line(&answered.value))?;
    }
    Ok(EXIT_OK)
}
