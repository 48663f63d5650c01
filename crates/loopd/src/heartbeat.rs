//! The heartbeat (SPEC 5): every `[heartbeat] every`, a turn on the `heartbeat` session with
//! `heartbeat.md` (read each beat from the system prompt's directory) as the user message. An
//! answer of exactly [`QUIET_REPLY`] is quiet; anything else is kept as a [`Notification`] in
//! `<state_dir>/notifications.jsonl`, labelled with the turn's context label at its end (what
//! the answer was made from). A beat is skipped while the previous one runs.

use crate::api::{ApiFailure, Backend};
use crate::config::Config;
use crate::journal::{self, JournalError};
use bxcore::{DataClass, Labels, SessionId, Timestamp, TurnEnd, TurnEvent};
use proto::api::{Notification, TaskRequest};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

/// The session heartbeat turns run in (reserved: clients cannot use it).
pub use proto::api::reserved::HEARTBEAT_SESSION;
/// The prompt file of a beat, beside the system prompt.
pub const HEARTBEAT_PROMPT_FILE: &str = "heartbeat.md";
/// The answer that means "nothing needs the owner's attention".
pub const QUIET_REPLY: &str = "HEARTBEAT_OK";
/// The notifications file, in the state dir.
pub use crate::journal::NOTIFICATIONS_FILE;

/// The notifications file of `cfg`.
pub fn path(cfg: &Config) -> PathBuf {
    cfg.state_dir.join(NOTIFICATIONS_FILE)
}

/// Every notification, oldest first.
pub fn list(cfg: &Config) -> Result<Vec<Notification>, JournalError> {
    journal::read_all(&path(cfg))
}

/// What the heartbeat needs from the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatOptions {
    /// The interval between beats.
    pub every: Duration,
    /// `heartbeat.md`.
    pub prompt: PathBuf,
    /// `notifications.jsonl`.
    pub notifications: PathBuf,
}

impl HeartbeatOptions {
    /// The options of `cfg`; `Ok(None)` when the heartbeat is off.
    pub fn from_config(cfg: &Config) -> Result<Option<HeartbeatOptions>, String> {
        let Some(every) = cfg.heartbeat.interval()? else {
            return Ok(None);
        };
        let dir = cfg.baseline.system.parent().unwrap_or(Path::new("."));
        Ok(Some(HeartbeatOptions {
            every,
            prompt: dir.join(HEARTBEAT_PROMPT_FILE),
            notifications: path(cfg),
        }))
    }
}

/// What the heartbeat has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BeatCounts {
    /// Beats that ran to the end of their turn (or failed to start).
    pub finished: u64,
    /// Beats that ended in a notification.
    pub notified: u64,
    /// Beats skipped because the previous one was still running.
    pub skipped: u64,
}

/// The running heartbeat task.
pub struct Heartbeat {
    stop: watch::Sender<bool>,
    /// Only the tests wait on the counts.
    #[cfg(test)]
    counts: watch::Receiver<BeatCounts>,
    task: JoinHandle<()>,
}

impl Heartbeat {
    /// Starts the heartbeat on the current runtime: the first beat one interval from now.
    pub fn start<B: Backend>(backend: Arc<B>, options: HeartbeatOptions) -> Heartbeat {
        let (stop, stop_rx) = watch::channel(false);
        let (counts_tx, counts) = watch::channel(BeatCounts::default());
        let task = tokio::spawn(beat_loop(backend, options, stop_rx, Arc::new(counts_tx)));
        #[cfg(not(test))]
        drop(counts);
        Heartbeat {
            stop,
            #[cfg(test)]
            counts,
            task,
        }
    }

    /// What it has done so far, updated after each beat; for waiting on.
    #[cfg(test)]
    pub fn counts(&self) -> watch::Receiver<BeatCounts> {
        self.counts.clone()
    }

    /// Stops it: no more beats; a running beat is abandoned (its turn goes on, and ends as
    /// `interrupted` when the engine shuts down) without a notification.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            tracing::warn!(error = %e, "the heartbeat task failed");
        }
    }
}

async fn beat_loop<B: Backend>(
    backend: Arc<B>,
    options: HeartbeatOptions,
    mut stop: watch::Receiver<bool>,
    counts: Arc<watch::Sender<BeatCounts>>,
) {
    let options = Arc::new(options);
    let mut ticks = tokio::time::interval(options.every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The first tick is at once; the first beat comes one interval after start.
    ticks.tick().await;
    tracing::info!(every = ?options.every, "heartbeat started");
    let mut current: Option<JoinHandle<()>> = None;
    loop {
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break,
            _ = ticks.tick() => {}
        }
        if current.as_ref().is_some_and(|beat| !beat.is_finished()) {
            tracing::info!("heartbeat skipped: the previous beat is still running");
            counts.send_modify(|c| c.skipped += 1);
            continue;
        }
        let (backend, options, counts) = (backend.clone(), options.clone(), counts.clone());
        current = Some(tokio::spawn(async move {
            let notified = match beat(&*backend, &options).await {
                Ok(notified) => notified,
                Err(e) => {
                    tracing::warn!(error = %e, "heartbeat beat failed");
                    false
                }
            };
            counts.send_modify(|c| {
                c.finished += 1;
                c.notified += u64::from(notified);
            });
        }));
    }
    if let Some(beat) = current {
        beat.abort();
    }
    tracing::info!("heartbeat stopped");
}

/// Why a beat could not run.
#[derive(Debug, thiserror::Error)]
enum BeatError {
    #[error("cannot read {path}: {source}")]
    Prompt {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the heartbeat task was refused: {0}")]
    Submit(#[from] ApiFailure),
    #[error("cannot keep the notification: {0}")]
    Journal(#[from] JournalError),
    #[error("{0}")]
    Internal(String),
}

/// Runs one beat; true when it kept a notification.
async fn beat<B: Backend>(backend: &B, options: &HeartbeatOptions) -> Result<bool, BeatError> {
    let text = tokio::fs::read_to_string(&options.prompt)
        .await
        .map_err(|source| BeatError::Prompt {
            path: options.prompt.clone(),
            source,
        })?;
    let session =
        SessionId::new(HEARTBEAT_SESSION).map_err(|e| BeatError::Internal(e.to_string()))?;
    let mut submitted = backend
        .submit(TaskRequest {
            session: Some(session.clone()),
            text,
            task_id: None,
        })
        .await?;
    let turn = submitted.accepted.turn;
    let mut answer = Answer::default();
    let mut end = None;
    // Until the turn says otherwise, what it was made from is unknown: the highest label.
    let mut labels = Labels::new(DataClass::Secret, true);
    while let Some(event) = submitted.events.recv().await {
        if let TurnEvent::Ended {
            end: e, context, ..
        } = &event
        {
            end = Some(e.clone());
            labels = *context;
        }
        answer.push(&event);
    }
    let Some(text) = notification_text(&answer.text, end.as_ref()) else {
        tracing::debug!(turn, "heartbeat: quiet");
        return Ok(false);
    };
    tracing::info!(turn, "heartbeat: keeping a notification");
    // The answer is the model's text; what it could repeat is the context it was made in.
    let labels = Labels::derived(Labels::PUBLIC, labels);
    let note = Notification {
        time: Timestamp::now(),
        session,
        turn,
        text,
        class: labels.class,
        untrusted: labels.untrusted,
    };
    let file = options.notifications.clone();
    tokio::task::spawn_blocking(move || journal::append(&file, &[note]))
        .await
        .map_err(|e| BeatError::Internal(format!("the notification's task failed: {e}")))??;
    Ok(true)
}

/// The visible answer of a turn's last model call, from its events.
#[derive(Debug, Default)]
struct Answer {
    text: String,
    /// Whether a model call ended since the last content: the next content starts a new one.
    call_ended: bool,
}

impl Answer {
    fn push(&mut self, event: &TurnEvent) {
        match event {
            TurnEvent::Content { text } => {
                if std::mem::take(&mut self.call_ended) {
                    self.text.clear();
                }
                self.text.push_str(text);
            }
            TurnEvent::ModelDone { .. } => self.call_ended = true,
            TurnEvent::Retry { .. } => self.text.clear(),
            _ => {}
        }
    }
}

/// What to notify of a turn that answered `answer` and ended as `end`; `None` when quiet.
fn notification_text(answer: &str, end: Option<&TurnEnd>) -> Option<String> {
    let answer = answer.trim();
    match end {
        Some(TurnEnd::Done) if answer == QUIET_REPLY => None,
        Some(TurnEnd::Done) => Some(answer.to_string()),
        Some(other) => Some(format!("the heartbeat turn ended as {other:?}: {answer}")),
        None => Some(format!("the heartbeat turn ended without an end: {answer}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_exact_quiet_reply_of_a_done_turn_is_quiet() {
        let done = Some(&TurnEnd::Done);
        assert_eq!(notification_text("  HEARTBEAT_OK\n", done), None);
        assert_eq!(
            notification_text("HEARTBEAT_OK, but the disk is full", done).as_deref(),
            Some("HEARTBEAT_OK, but the disk is full")
        );
        assert!(notification_text("HEARTBEAT_OK", Some(&TurnEnd::MaxSteps)).is_some());
    }

    #[test]
    fn the_answer_is_the_last_calls_content() {
        let mut answer = Answer::default();
        for event in [
            TurnEvent::Content {
                text: "let me ".into(),
            },
            TurnEvent::Content {
                text: "look".into(),
            },
            TurnEvent::ModelDone {
                usage: bxcore::Usage::default(),
                model_us: 1,
                timings: None,
            },
            TurnEvent::Content {
                text: "HEARTBEAT".into(),
            },
            TurnEvent::Content { text: "_OK".into() },
        ] {
            answer.push(&event);
        }
        assert_eq!(answer.text, "HEARTBEAT_OK");
    }
}
