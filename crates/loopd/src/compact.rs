//! Compaction: when a session's context fills, its epoch is condensed on the background slot
//! into a carry, and the session goes on in a new epoch that starts with that carry (SPEC 3).
//!
//! Labels are never lost on the way: the carry's labels are the session's context label (the
//! join of everything it was made from), stored in the `EpochStart` record.
//!
//! A turn that hits the context ceiling (`SessionFull`) is compacted and run again once, in the
//! new epoch. Its user record stays where it was, in the old epoch; the new epoch's messages
//! re-state it right after the carry ([`epoch_messages`]), so the request is never lost and the
//! log never holds it twice.

use crate::baseline::{context_labels, epoch_labels, messages_with_carry};
use crate::llama::{ChatMessage, ChatRequest, InferError};
use crate::session::{Baseline, Session, StoreError};
use crate::turn::Runtime;
use bxcore::sanitize::neutralise;
use bxcore::{Labels, LogRecord, Timestamp, Usage};
use std::collections::HashMap;
use std::path::PathBuf;

/// The prompt file of a compaction, beside the system prompt.
pub const COMPACT_PROMPT_FILE: &str = "compact.md";

/// Why a compaction did not happen. The epoch is then left as it was.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    /// The compaction prompt could not be read.
    #[error("cannot read the compaction prompt {path}: {source}")]
    Prompt {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The current epoch has no baseline yet: there is nothing to compact.
    #[error("the epoch has no baseline yet")]
    NoBaseline,
    /// The model call failed.
    #[error("the model call failed: {0}")]
    Infer(#[from] InferError),
    /// The model answered with nothing.
    #[error("the model's answer was empty")]
    Empty,
    /// The log refused the epoch start.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Whether compaction is due: the last prompt plus its completion reach `threshold` of the
/// slot's context (`n_ctx`, tokens).
pub fn due(usage: &Usage, threshold: f64, n_ctx: u32) -> bool {
    let used = usage.prompt_tokens.saturating_add(usage.completion_tokens);
    // Token counts are far below 2^53: the conversion is exact.
    used as f64 >= threshold * f64::from(n_ctx)
}

/// `text` cut to at most `max_chars` characters (on a character boundary).
pub(crate) fn cap_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => text[..end].to_string(),
        None => text.to_string(),
    }
}

/// The messages of a model call in the current epoch: baseline, carry, the request of a turn
/// that was open when the epoch started (re-stated, see the module doc), then the epoch's
/// records.
pub fn epoch_messages(session: &Session, baseline: &Baseline) -> Vec<ChatMessage> {
    let mut messages = crate::baseline::messages(session, baseline);
    if let Some(content) = carried_request(session) {
        // After the system prompt and the carry.
        let at = messages.len().min(2);
        messages.insert(at, ChatMessage::User { content });
    }
    messages
}

/// The user request of the turn that was open when the current epoch started, if any.
fn carried_request(session: &Session) -> Option<String> {
    let start = session.records().len() - session.epoch_records().len();
    let mut open: Option<&str> = None;
    for record in &session.records()[..start] {
        match record {
            LogRecord::User { content, .. } => open = Some(content),
            LogRecord::TurnEnd { .. } => open = None,
            _ => {}
        }
    }
    open.map(str::to_string)
}

/// Compacts the current epoch into a new one: one no-tools completion on the background slot
/// over the epoch's messages (opted-in results replaced by their summaries) with
/// `compact.md` as the last user message; its answer up to the notes section
/// ([`crate::memory::NOTES_HEADING`]), neutralised and capped at `[compact] carry_chars`, is
/// the carry of the `EpochStart` appended; the notes after it are stored in memory with the
/// carry's labels. The new epoch's baseline
/// is written by the next turn. On an error nothing is appended.
pub fn compact_session(session: &mut Session, rt: &Runtime<'_>) -> Result<(), CompactError> {
    let path = rt.cfg.baseline.system.with_file_name(COMPACT_PROMPT_FILE);
    let prompt = std::fs::read_to_string(&path).map_err(|source| CompactError::Prompt {
        path: path.clone(),
        source,
    })?;
    let baseline = session.current_baseline().ok_or(CompactError::NoBaseline)?;
    let records = with_summaries(session.epoch_records());
    let mut messages = messages_with_carry(baseline, &records, session.carry());
    if let Some(content) = carried_request(session) {
        messages.insert(messages.len().min(2), ChatMessage::User { content });
    }
    let answer = ask_for_carry(rt, messages, prompt.trim_end())?;
    let text = answer.content.unwrap_or_default();
    let (carry, notes) = crate::memory::split_answer(&text);
    let carry = cap_chars(neutralise(&carry).as_ref(), rt.cfg.compact.carry_chars);
    if carry.is_empty() {
        return Err(CompactError::Empty);
    }
    // The carry is made from the epoch's records, in the session's context.
    let labels = Labels::derived(epoch_labels(session), context_labels(session));
    session.append(LogRecord::EpochStart {
        time: Timestamp::now(),
        epoch: session.epoch() + 1,
        carry,
        class: labels.class,
        untrusted: labels.untrusted,
    })?;
    // The epoch has begun either way: notes that cannot be stored are only lost notes.
    if let Err(e) = crate::memory::store(rt.cfg, session.id(), &notes, labels) {
        tracing::warn!(session = %session.id(), error = %e, "cannot store the compaction's memory notes");
    }
    Ok(())
}

/// How much of each message a compaction keeps when the whole epoch does not fit the slot:
/// tried in order after the full epoch, in characters. The epoch that overflowed its slot
/// (`SessionFull`) is the usual case: without this its compaction would overflow too.
pub const SHRINK_MESSAGE_CHARS: [usize; 3] = [2_000, 500, 120];

/// The compaction call: the epoch's `messages` and then `prompt`, on the background slot with no
/// tools. When they do not fit the slot, each message but the system prompt is cut to the
/// sizes of [`SHRINK_MESSAGE_CHARS`] in turn, each cut marked.
fn ask_for_carry(
    rt: &Runtime<'_>,
    messages: Vec<ChatMessage>,
    prompt: &str,
) -> Result<crate::llama::Completion, CompactError> {
    let limits = std::iter::once(None).chain(SHRINK_MESSAGE_CHARS.into_iter().map(Some));
    let mut too_big = None;
    for limit in limits {
        let mut shrunk: Vec<ChatMessage> = match limit {
            Some(max_chars) => messages.iter().map(|m| shrink(m, max_chars)).collect(),
            None => messages.clone(),
        };
        shrunk.push(ChatMessage::User {
            content: prompt.to_string(),
        });
        let request = ChatRequest {
            slot: rt.cfg.slots.background,
            messages: shrunk,
            tools: Vec::new(),
            thinking: rt.cfg.r#loop.thinking,
        };
        match rt.client.chat_with_retry(&request, &mut |_| {}) {
            Err(e @ InferError::SessionFull { .. }) => {
                tracing::info!(
                    ?limit,
                    "the epoch does not fit the slot for compaction; cutting its messages"
                );
                too_big = Some(e);
            }
            other => return other.map_err(CompactError::from),
        }
    }
    Err(too_big.map_or(CompactError::Empty, CompactError::from))
}

/// `message` with its text cut to `max_chars` (the system prompt is kept whole).
fn shrink(message: &ChatMessage, max_chars: usize) -> ChatMessage {
    let cut = |text: &str| {
        let kept = cap_chars(text, max_chars);
        if kept.len() < text.len() {
            format!("{kept} [cut for compaction]")
        } else {
            kept
        }
    };
    match message {
        ChatMessage::System { .. } => message.clone(),
        ChatMessage::User { content } => ChatMessage::User {
            content: cut(content),
        },
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => ChatMessage::Assistant {
            content: cut(content),
            tool_calls: tool_calls.clone(),
        },
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => ChatMessage::Tool {
            tool_call_id: tool_call_id.clone(),
            content: cut(content),
        },
    }
}

/// The epoch's records with each summarised tool result's content replaced by its summary.
fn with_summaries(records: &[LogRecord]) -> Vec<LogRecord> {
    let summaries: HashMap<u64, &str> = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolSummary { call, content, .. } => Some((call.0, content.as_str())),
            _ => None,
        })
        .collect();
    records
        .iter()
        .map(|record| {
            let mut record = record.clone();
            if let LogRecord::ToolResult { call, content, .. } = &mut record
                && let Some(summary) = summaries.get(&call.0)
            {
                *content = format!("[summary of the tool output] {summary}");
            }
            record
        })
        .collect()
}

/// Records that a compaction failed: a `Note` in the log and a warning. The epoch is unchanged.
pub fn log_failure(session: &mut Session, e: &CompactError) {
    tracing::warn!(session = %session.id(), error = %e, "compaction failed; the epoch is unchanged");
    let note = LogRecord::Note {
        time: Timestamp::now(),
        text: format!("compaction failed, the epoch is unchanged: {e}"),
    };
    if let Err(e) = session.append(note) {
        tracing::warn!(session = %session.id(), error = %e, "cannot record the failed compaction");
    }
}

/// Summaries, then compaction: what a context-full turn needs before it runs again. Returns
/// whether a new epoch began.
pub fn make_room(rt: &Runtime<'_>, session: &mut Session) -> bool {
    if let Err(e) = crate::summarise::missing(rt, session) {
        tracing::warn!(session = %session.id(), error = %e, "tool summary");
    }
    match compact_session(session, rt) {
        Ok(()) => true,
        Err(e) => {
            log_failure(session, &e);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_at_the_threshold_of_the_slot() {
        let usage = |p, c| Usage {
            prompt_tokens: p,
            completion_tokens: c,
            cached_tokens: 0,
        };
        assert!(!due(&usage(700, 99), 0.8, 1000));
        assert!(due(&usage(700, 100), 0.8, 1000));
        assert!(due(&usage(2000, 0), 1.0, 1000));
    }

    #[test]
    fn cap_chars_cuts_on_characters() {
        assert_eq!(cap_chars("héllo", 2), "hé");
        assert_eq!(cap_chars("hi", 5), "hi");
    }
}
