//! Compaction: when a session's context fills, its epoch is condensed into a carry, and the
//! session goes on in a new epoch that starts with that carry (SPEC 3).
//!
//! The model writes the carry ([`model`]: on the background slot, the request sized from
//! measured token counts by [`fit`] so that the answer has room). When that fails for any
//! reason, the carry is made without a model ([`mechanical`]), so a compaction that is due
//! always yields a new epoch: a session never stays past its slot with every turn failing,
//! and a failed try is not tried again after every later turn.
//!
//! A compaction counts in no turn's budget (one inside a turn counts in that turn's spend,
//! uncut), but never generates past the day's: its answer is capped at what the day leaves,
//! and once the day is spent the carry is made mechanically, so a session stays usable.
//!
//! Labels are never lost on the way: the carry's labels are `Labels::derived` of what it was
//! made from and the session's context, stored in the `EpochStart` record.
//!
//! Either way the carry ends with the owner's own words, word for word ([`owner_words`]): what
//! the owner wrote in this epoch and the section of the carry before, so a fact given in the
//! first turn outlives any number of compactions whatever the summary keeps.
//!
//! A turn compacts before a model call whose prompt would not fit the slot ([`room`]), and a
//! turn that hits the context ceiling anyway (`SessionFull`) is compacted and run again once,
//! in the new epoch. Its user record stays where it was, in the old epoch; the new epoch's
//! messages re-state it right after the carry ([`epoch_messages`]), so the request is never
//! lost and the log never holds it twice.

pub(crate) mod fit;
pub(crate) mod mechanical;
pub(crate) mod model;
pub(crate) mod owner_words;
pub(crate) mod room;

pub use room::{before_call, make_room};

use crate::baseline::{context_labels, epoch_labels};
use crate::llama::{ChatMessage, InferError};
use crate::runtime::{Background, BackgroundOutcome, Runtime};
use crate::session::{Baseline, Session, StoreError};
use bxcore::sanitize::neutralise;
use bxcore::{Labels, LogRecord, Timestamp, Usage};
use std::path::PathBuf;
use std::time::Instant;

/// The prompt file of a compaction, beside the system prompt.
pub const COMPACT_PROMPT_FILE: &str = "compact.md";

/// Why the model's compaction failed, or why no compaction happened at all.
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
    /// The current epoch has no baseline yet: the model has no system prompt to start from.
    #[error("the epoch has no baseline yet")]
    NoBaseline,
    /// The epoch holds nothing to compact (no message beyond a carry).
    #[error("there is nothing to compact: the epoch holds no messages yet")]
    Nothing,
    /// The request cannot be cut to leave the answer room in the slot.
    #[error(
        "the compaction request cannot fit the slot with room for the answer: {tokens} tokens          at the least, {budget} allowed"
    )]
    NoRoom {
        /// The smallest request measured.
        tokens: u32,
        /// The most it could have.
        budget: u32,
    },
    /// The day's budget (`[budgets] max_generated_tokens_per_day`) is spent: the model is not
    /// asked, and the carry is made without it.
    #[error("the model was not asked: the day's budget is spent ({0})")]
    DaySpent(String),
    /// The model call failed.
    #[error("the model call failed: {0}")]
    Infer(#[from] InferError),
    /// The answer was cut at its token limit: a summary cut short loses what it did not reach.
    #[error("the model's answer was cut at its limit of {tokens} tokens")]
    Cut {
        /// Tokens it had.
        tokens: u64,
    },
    /// The answer's summary is too short to be one.
    #[error("the model's summary has {chars} characters, fewer than {min}")]
    TooShort {
        /// Characters it had.
        chars: usize,
        /// The fewest allowed ([`model::MIN_CARRY_CHARS`]).
        min: usize,
    },
    /// The log refused the epoch start.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A new epoch began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compacted {
    /// Its number.
    pub epoch: u32,
    /// Why the model's carry was not used, when the carry was made mechanically.
    pub model_failure: Option<String>,
    /// Characters in the carry.
    pub carry_chars: usize,
    /// Memory notes stored.
    pub notes: usize,
}

/// Whether compaction is due: the last prompt plus its completion reach `threshold` of the
/// slot's context (`n_ctx`, tokens).
pub fn due(usage: &Usage, threshold: f64, n_ctx: u32) -> bool {
    let used = usage.prompt_tokens.saturating_add(usage.completion_tokens);
    // Token counts are far below 2^53: the conversion is exact.
    used as f64 >= threshold * f64::from(n_ctx)
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
    carried_user(session).map(|(_, content)| content.to_string())
}

/// [`carried_request`] and its turn.
fn carried_user(session: &Session) -> Option<(u64, &str)> {
    let start = session.records().len() - session.epoch_records().len();
    let mut open: Option<(u64, &str)> = None;
    for record in &session.records()[..start] {
        match record {
            LogRecord::User { turn, content, .. } => open = Some((*turn, content)),
            LogRecord::TurnEnd { .. } => open = None,
            _ => {}
        }
    }
    open
}

/// Whether the current epoch holds anything to compact: a message other than the request of
/// the turn open now (that one is re-stated after any carry, so compacting it gains nothing).
pub fn compactable(session: &Session) -> bool {
    let open = session.open_turn();
    session.epoch_records().iter().any(|r| match r {
        LogRecord::User { turn, .. } => Some(*turn) != open,
        LogRecord::Assistant { .. } | LogRecord::ToolResult { .. } => true,
        _ => false,
    })
}

/// Compacts the current epoch into a new one. The model writes the carry ([`model::ask`]):
/// its answer up to or after the notes section ([`crate::memory::split_answer`]),
/// neutralised and capped at `[compact] carry_chars`; the notes are stored in memory with the
/// carry's labels. When that fails for any reason, a `Note` says why and the carry is made
/// mechanically ([`mechanical::carry`]). Either way loopd ends the carry with the owner's own
/// words ([`owner_words`]), in room taken from the summary's, and what the owner asked to be
/// remembered is stored as notes too, with the carry's labels. The new epoch's baseline is
/// written by the next turn. Fails only when there is nothing to compact (nothing is appended
/// then) or when the log refuses a record. The meter counts each compaction that was tried,
/// with its duration.
pub fn compact_session(session: &mut Session, rt: &Runtime<'_>) -> Result<Compacted, CompactError> {
    let started = Instant::now();
    let result = compact_epoch(session, rt);
    let outcome = match &result {
        // Nothing was tried.
        Err(CompactError::Nothing) => return result,
        Ok(done) if done.model_failure.is_none() => BackgroundOutcome::Ok,
        Ok(_) => BackgroundOutcome::Mechanical,
        Err(_) => BackgroundOutcome::Failed,
    };
    rt.meter
        .background_done(Background::Compaction, outcome, started.elapsed());
    result
}

/// [`compact_session`] without the meter.
fn compact_epoch(session: &mut Session, rt: &Runtime<'_>) -> Result<Compacted, CompactError> {
    if !compactable(session) {
        return Err(CompactError::Nothing);
    }
    let context = context_labels(session);
    let carry_room = room::for_carry(session, rt);
    let words = owner_words::of_epoch(session);
    let (section, carry_room) = owner_section(session, rt, &words, carry_room);
    let (body, mut notes, source, model_failure) = match model::ask(session, rt, carry_room) {
        Ok(answer) => (answer.carry, answer.notes, epoch_labels(session), None),
        Err(e) => {
            let made = without_model(session, rt, carry_room);
            tracing::warn!(session = %session.id(), error = %e, kept = made.kept, dropped = made.dropped, "the model's compaction failed; compacting without it");
            session.append(LogRecord::Note {
                time: Timestamp::now(),
                text: format!(
                    "the model's compaction failed ({e}); compacted without the model: kept \
                     the first request and the last {} messages, left out {}",
                    made.kept, made.dropped
                ),
            })?;
            let source = epoch_labels(session).join(made.notes_labels);
            (made.carry, Vec::new(), source, Some(e.to_string()))
        }
    };
    // The carry is made from the epoch's records (and notes), in the session's context: the
    // owner's words are among those records, and lower nothing.
    let labels = Labels::derived(source, context);
    let carry = owner_words::attach(&body, &section);
    notes.extend(owner_notes(rt, session, &words));
    let epoch = session.epoch() + 1;
    let carry_chars = carry.chars().count();
    session.append(LogRecord::EpochStart {
        time: Timestamp::now(),
        epoch,
        carry,
        class: labels.class,
        untrusted: labels.untrusted,
    })?;
    // The epoch has begun either way: notes that cannot be stored are only lost notes.
    if let Err(e) = crate::memory::store(rt.cfg, session.id(), &notes, labels) {
        tracing::warn!(session = %session.id(), error = %e, "cannot store the compaction's memory notes");
    }
    Ok(Compacted {
        epoch,
        model_failure,
        carry_chars,
        notes: notes.len(),
    })
}

/// The section of the owner's words of the new epoch's carry ([`owner_words::section`]: the
/// previous carry's and `words`), in at most `[compact] owner_words_chars` and
/// [`owner_words::OWNER_WORDS_ROOM_DIVISOR`] of the carry's room (a quarter of the slot or
/// `carry_room`, at [`mechanical::MECHANICAL_CHARS_PER_TOKEN`]); and the room left for the
/// rest of the carry: that room less the section's tokens (the server's count, or its bytes
/// when the server cannot count), so that the whole carry takes no more than before.
fn owner_section(
    session: &Session,
    rt: &Runtime<'_>,
    words: &[String],
    carry_room: Option<u32>,
) -> (String, Option<u32>) {
    let room = (rt.n_ctx / model::ANSWER_SLOT_DIVISOR).min(carry_room.unwrap_or(u32::MAX));
    let budget = rt.cfg.compact.owner_words_chars.min(
        room as usize * mechanical::MECHANICAL_CHARS_PER_TOKEN
            / owner_words::OWNER_WORDS_ROOM_DIVISOR,
    );
    let previous = session
        .carry()
        .map(|(carry, _)| owner_words::split(carry).1)
        .unwrap_or_default();
    let section = owner_words::section(&previous, words, budget);
    if section.is_empty() {
        return (section, carry_room);
    }
    let tokens = rt
        .blocking
        .wait(rt.models.main.client.text_tokens(&section))
        .unwrap_or_else(|_| u32::try_from(section.len()).unwrap_or(u32::MAX));
    // The blank line between the summary and the section.
    let tokens = tokens.saturating_add(1);
    (section, Some(room.saturating_sub(tokens)))
}

/// What the owner asked to be remembered in `words` ([`owner_words::remembered`]) that this
/// session has not stored yet; none when memory cannot be read.
fn owner_notes(rt: &Runtime<'_>, session: &Session, words: &[String]) -> Vec<String> {
    let asked = owner_words::remembered(words, crate::memory::NOTE_MAX_CHARS);
    if asked.is_empty() {
        return asked;
    }
    match crate::memory::list(rt.cfg) {
        Ok(known) => asked
            .into_iter()
            .filter(|text| {
                !known
                    .iter()
                    .any(|n| n.session == *session.id() && n.text == *text)
            })
            .collect(),
        Err(e) => {
            tracing::warn!(session = %session.id(), error = %e, "cannot read memory; the owner's notes are not stored");
            Vec::new()
        }
    }
}

/// The carry made without the model ([`mechanical::carry`]), neutralised, in at most
/// `[compact] carry_chars` and what a quarter of the slot or `carry_room` (tokens, when known)
/// holds at [`mechanical::MECHANICAL_CHARS_PER_TOKEN`]; when the server can count it, cut
/// further until it fits `carry_room`.
fn without_model(
    session: &Session,
    rt: &Runtime<'_>,
    carry_room: Option<u32>,
) -> mechanical::Mechanical {
    let room = (rt.n_ctx / model::ANSWER_SLOT_DIVISOR).min(carry_room.unwrap_or(u32::MAX));
    let mut max_chars = rt
        .cfg
        .compact
        .carry_chars
        .min(room as usize * mechanical::MECHANICAL_CHARS_PER_TOKEN);
    let notes = mechanical::session_notes(rt.cfg, session.id());
    // The earlier owner's words are in the section already.
    let previous = session.carry().map(|(text, _)| owner_words::split(text).0);
    let mut made;
    let mut tries = 0;
    loop {
        let source = mechanical::Source {
            records: session.records(),
            epoch: session.epoch_records(),
            open_turn: session.open_turn(),
            previous,
            notes: &notes,
        };
        made = mechanical::carry(&source, max_chars);
        made.carry = neutralise(&made.carry).into_owned();
        tries += 1;
        let Ok(tokens) = rt
            .blocking
            .wait(rt.models.main.client.text_tokens(&made.carry))
        else {
            break;
        };
        if tokens <= room || tries >= fit::FIT_MAX_MEASUREMENTS || max_chars == 0 {
            break;
        }
        // Too many tokens for its room: fewer characters in proportion.
        max_chars = max_chars * room as usize / tokens as usize * fit::FIT_TARGET_PERCENT / 100;
    }
    made
}

/// Records that no compaction happened: a `Note` in the log and a warning. The epoch is
/// unchanged.
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
}
