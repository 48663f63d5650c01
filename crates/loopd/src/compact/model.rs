//! The model's compaction: one no-tools completion on the background slot over the epoch's
//! messages (opted-in results replaced by their summaries) with `compact.md` last, sized from
//! measured token counts so that the answer has room, and refused when the answer was cut at
//! its limit or is too short to be a summary.

use super::fit::{FitError, Parts, fit};
use super::{COMPACT_PROMPT_FILE, CompactError, carried_request};
use crate::baseline::messages_with_carry;
use crate::llama::FINISH_LENGTH;
use crate::llama::{ChatEvent, ChatMessage, ChatRequest, Client};
use crate::runtime::{Runtime, micros_since};
use crate::session::Session;
use crate::text::cap_chars;
use bxcore::LogRecord;
use bxcore::sanitize::neutralise;
use std::collections::HashMap;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The fewest characters a carry may have: a shorter answer is no summary (issue 12: an
/// answer cut to `## Notes`, 8 characters, became the carry and the session lost everything).
pub const MIN_CARRY_CHARS: usize = 20;
/// A compaction's answer takes at most this share of the slot (1/N of `n_ctx`), so that the
/// request has room for the epoch and the new epoch for its turns.
pub const ANSWER_SLOT_DIVISOR: u32 = 4;
/// Tokens kept free beyond the answer's: what the measured prompt and the real one may
/// differ by (a BOS token, the generation prompt).
pub const MEASURE_MARGIN_TOKENS: u32 = 8;

/// What the model's answer gave.
pub struct Answer {
    /// The carry: neutralised, capped at `[compact] carry_chars`.
    pub carry: String,
    /// The notes to remember.
    pub notes: Vec<String>,
}

/// The most tokens of a compaction's answer: `[compact] answer_tokens`, at most a quarter of
/// the slot, and at most `carry_room` (what the new epoch has room for, when known).
pub fn answer_tokens(rt: &Runtime<'_>, carry_room: Option<u32>) -> u32 {
    rt.cfg
        .compact
        .answer_tokens
        .min(rt.n_ctx / ANSWER_SLOT_DIVISOR)
        .min(carry_room.unwrap_or(u32::MAX))
        .max(1)
}

/// Asks the model for the carry of the current epoch, in at most `carry_room` tokens (see
/// [`answer_tokens`]).
pub fn ask(
    session: &Session,
    rt: &Runtime<'_>,
    carry_room: Option<u32>,
) -> Result<Answer, CompactError> {
    // A compaction counts in no turn's budget: it may generate no more than the day leaves,
    // and with the day spent the carry is made without the model (`compact_epoch`).
    let generated_today = rt.meter.generated_today();
    let day_left = crate::budget::day::left(&rt.cfg.budgets, generated_today);
    if day_left == Some(0) {
        let why = crate::budget::day::spent(&rt.cfg.budgets, generated_today, chrono::Utc::now())
            .unwrap_or_default();
        return Err(CompactError::DaySpent(why));
    }
    let path = rt.cfg.baseline.system.with_file_name(COMPACT_PROMPT_FILE);
    let prompt = std::fs::read_to_string(&path).map_err(|source| CompactError::Prompt {
        path: path.clone(),
        source,
    })?;
    let baseline = session.current_baseline().ok_or(CompactError::NoBaseline)?;
    let records = with_summaries(session.epoch_records());
    let mut messages = messages_with_carry(baseline, &records, session.carry()).into_iter();
    let system = messages.next().ok_or(CompactError::NoBaseline)?;
    let mut head = Vec::new();
    if session.carry().is_some() {
        head.extend(messages.next());
    }
    head.extend(carried_request(session).map(|content| ChatMessage::User { content }));
    let parts = Parts {
        system,
        head,
        records: messages.collect(),
        prompt: ChatMessage::User {
            content: prompt.trim_end().to_string(),
        },
    };
    let answer_tokens = day_left.map_or(answer_tokens(rt, carry_room), |left| {
        answer_tokens(rt, carry_room).min(u32::try_from(left).unwrap_or(u32::MAX))
    });
    let budget = rt
        .n_ctx
        .saturating_sub(answer_tokens + MEASURE_MARGIN_TOKENS);
    let request = |messages: Vec<ChatMessage>| ChatRequest {
        slot: rt.models.background.slot,
        messages,
        tools: Vec::new(),
        thinking: rt.cfg.r#loop.thinking,
        banned: Vec::new(),
    };
    let measure = &mut |messages: &[ChatMessage]| {
        rt.blocking.wait(
            rt.models
                .background
                .client
                .prompt_tokens(&request(messages.to_vec())),
        )
    };
    let messages = match fit(&parts, budget, measure) {
        Ok(messages) => messages,
        Err(FitError::TooBig { tokens, budget }) => {
            return Err(CompactError::NoRoom { tokens, budget });
        }
        Err(FitError::Measure(e)) => {
            // A server that cannot measure still gets the whole epoch: if it does not fit, it
            // says so, and an answer cut short is refused below.
            tracing::warn!(session = %session.id(), error = %e, "cannot measure the compaction request; sending it unmeasured");
            let mut whole = vec![parts.system.clone()];
            whole.extend(parts.head.iter().cloned());
            whole.extend(parts.records.iter().cloned());
            whole.push(parts.prompt.clone());
            whole
        }
    };
    let client: Client = rt.models.background.client.with_max_tokens(answer_tokens);
    let never = CancellationToken::new();
    let started = Instant::now();
    let completion = rt.blocking.wait(client.chat_with_retry(
        &request(messages),
        &mut |_: &ChatEvent| {},
        &never,
    ))?;
    rt.meter.background_call(
        &completion.usage,
        completion.timings.map(Into::into).as_ref(),
        micros_since(started),
    );
    if completion.finish_reason == FINISH_LENGTH {
        return Err(CompactError::Cut {
            tokens: completion.usage.completion_tokens,
        });
    }
    let text = completion.content.unwrap_or_default();
    let (carry, notes) = crate::memory::split_answer(&text);
    // The owner's words are loopd's to write: a section the model wrote is taken out.
    let carry = super::owner_words::strip(&carry);
    let carry = cap_chars(neutralise(&carry).as_ref(), rt.cfg.compact.carry_chars);
    let chars = carry.chars().count();
    if chars < MIN_CARRY_CHARS {
        return Err(CompactError::TooShort {
            chars,
            min: MIN_CARRY_CHARS,
        });
    }
    Ok(Answer { carry, notes })
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
