//! Making room in a turn: before a model call whose prompt would not fit the slot (with
//! `[compact] turn_room_tokens` to spare for the answer), and after a call the server refused
//! as too big (`SessionFull`). Either way: summaries, then compaction, which always yields a
//! new epoch when there is something to compact.

use super::{carried_request, compact_session, compactable, epoch_messages, log_failure};
use crate::baseline::BaselineError;
use crate::baseline::{self, messages_with_carry};
use crate::llama::{ChatMessage, ChatRequest};
use crate::runtime::Runtime;
use crate::session::Session;

/// Tokens a message adds to a prompt beyond its text's bytes, at the most (its role and the
/// template's markers): used to bound a prompt from the last measured one without asking the
/// server.
pub const MESSAGE_OVERHEAD_TOKENS: u32 = 16;

/// Before a turn's model call: when the call's prompt would leave fewer than
/// `[compact] turn_room_tokens` of the slot, compacts the session first and writes the new
/// epoch's baseline. The prompt is bounded from the last answer's measured tokens plus the
/// bytes of what came after it (a token is at least a byte); only when that bound is too high
/// is it measured by the server. A server that cannot measure leaves the call as it is (the
/// server still refuses a prompt that does not fit, and [`make_room`] follows).
pub fn before_call(rt: &Runtime<'_>, session: &mut Session) -> Result<(), BaselineError> {
    if !compactable(session) {
        return Ok(());
    }
    let Some(baseline) = session.current_baseline() else {
        return Ok(());
    };
    let limit = rt.n_ctx.saturating_sub(rt.cfg.compact.turn_room_tokens);
    let messages = epoch_messages(session, baseline);
    if bound_from_last_answer(session, &messages).is_some_and(|bound| bound <= limit) {
        return Ok(());
    }
    let request = ChatRequest {
        slot: rt.models.main.slot,
        messages,
        tools: baseline.tools.clone(),
        thinking: rt.cfg.r#loop.thinking,
        banned: Vec::new(),
    };
    let tokens = match rt
        .blocking
        .wait(rt.models.main.client.prompt_tokens(&request))
    {
        Ok(tokens) => tokens,
        Err(e) => {
            tracing::debug!(session = %session.id(), error = %e, "cannot measure the next prompt");
            return Ok(());
        }
    };
    if tokens <= limit {
        return Ok(());
    }
    tracing::info!(session = %session.id(), tokens, n_ctx = rt.n_ctx, "the next call would not fit the slot; compacting first");
    if make_room(rt, session) {
        baseline::ensure(session, rt.cfg, rt.system, rt.registry)?;
    }
    Ok(())
}

/// An upper bound of the prompt's tokens: the last answer's prompt and completion (measured
/// by the server) plus, for each message after it, its bytes and [`MESSAGE_OVERHEAD_TOKENS`].
/// `None` when the epoch has no measured answer yet.
fn bound_from_last_answer(session: &Session, messages: &[ChatMessage]) -> Option<u32> {
    let usage = session.last_usage()?;
    let last = messages
        .iter()
        .rposition(|m| matches!(m, ChatMessage::Assistant { .. }))?;
    let after: u64 = messages[last + 1..]
        .iter()
        .map(|m| {
            let bytes = match m {
                ChatMessage::System { content }
                | ChatMessage::User { content }
                | ChatMessage::Tool { content, .. }
                | ChatMessage::Assistant { content, .. } => content.len(),
            };
            bytes as u64 + u64::from(MESSAGE_OVERHEAD_TOKENS)
        })
        .sum();
    let bound = usage.prompt_tokens + usage.completion_tokens + after;
    Some(u32::try_from(bound).unwrap_or(u32::MAX))
}

/// The tokens a carry may take so that the new epoch's first call still leaves
/// `[compact] turn_room_tokens` free: the slot less the baseline (system prompt, memory, tools)
/// and the request re-stated after the carry, as the server measures them. `None` when that
/// cannot be measured (no baseline, or a server that does not answer).
pub fn for_carry(session: &Session, rt: &Runtime<'_>) -> Option<u32> {
    let baseline = session.current_baseline()?;
    let mut messages = messages_with_carry(baseline, &[], Some(("", bxcore::Labels::PUBLIC)));
    messages.extend(carried_request(session).map(|content| ChatMessage::User { content }));
    let request = ChatRequest {
        slot: rt.models.main.slot,
        messages,
        tools: baseline.tools.clone(),
        thinking: rt.cfg.r#loop.thinking,
        banned: Vec::new(),
    };
    match rt
        .blocking
        .wait(rt.models.main.client.prompt_tokens(&request))
    {
        Ok(fixed) => Some(
            rt.n_ctx
                .saturating_sub(rt.cfg.compact.turn_room_tokens)
                .saturating_sub(fixed),
        ),
        Err(e) => {
            tracing::debug!(session = %session.id(), error = %e, "cannot measure the new epoch's baseline");
            None
        }
    }
}

/// Summaries, then compaction: what a turn needs when its context is full. Returns whether a
/// new epoch began.
pub fn make_room(rt: &Runtime<'_>, session: &mut Session) -> bool {
    if let Err(e) = crate::summarise::missing(rt, session) {
        tracing::warn!(session = %session.id(), error = %e, "tool summary");
    }
    match compact_session(session, rt) {
        Ok(_) => true,
        Err(e) => {
            log_failure(session, &e);
            false
        }
    }
}
