//! The last word of a turn that ran out of steps (issue 34): at `[loop] max_steps`, or when
//! the model kept repeating calls (`Repeats::give_up`), the turn makes one more model call on
//! the main slot with no tools offered and [`LAST_WORD_INSTRUCTION`] after the epoch's
//! messages, so the owner gets an answer (what was done and found, what is not done) instead
//! of nothing. The turn still ends `max_steps`.
//!
//! The instruction is sent with this call only and is never a record of its own: replayed,
//! the answer follows the turn's last tool results as any final answer does (`epoch_messages`
//! replays an assistant record without tool calls as the turn's answer), so later turns read
//! a turn that answered, not an order to stop that no longer holds. The log still holds what
//! was sent: the `note` written before the call quotes the instruction, and notes are never
//! replayed.
//!
//! No last word when the turn was stopped (cancelled, shut down, a budget reached), when the
//! budgets leave no tokens, or when the call fails: the turn ends as it did before, without an
//! answer, and a `note` says why.

use super::last_request::{LAST_WORD_BANNED, instruction, without_repeats};
use super::{Runtime, Stop, TurnError, main_request, model_call, model_done};
use crate::compact;
use crate::llama::{ChatMessage, FINISH_LENGTH};
use crate::runtime::TurnWork;
use crate::session::Session;
use bxcore::{LogRecord, Timestamp, TurnEnd, TurnEvent};

/// What the model is told, after the epoch's messages, in the last call of a turn that ran
/// out of steps, when the turn's request is not in the log ([`instruction`] quotes it when it
/// is). It asks for the answer to the owner's request first: asked what it did, the default
/// model answered "I did not run any steps in this task." beside a page that held the answer
/// (`docs/evals.md`).
pub const LAST_WORD_INSTRUCTION: &str = "Stop calling tools. Answer my request now from the \
    tool results above, in a few sentences; if part of it could not be done, say which part.";

/// The tags Qwen's chat template puts around a tool call.
const TOOL_CALL_OPEN: &str = "<tool_call>";
/// See [`TOOL_CALL_OPEN`].
const TOOL_CALL_CLOSE: &str = "</tool_call>";

/// Why a turn ran out of steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RanOut {
    /// It reached `[loop] max_steps`.
    MaxSteps,
    /// The model went on repeating calls after it was told (`Repeats::give_up`).
    Repeats,
}

/// Ends a turn that ran out of steps: a note saying why, then the last word (see the module
/// doc). The end is `max_steps` whatever came of the last word; only a log that refuses a
/// record fails the turn.
pub(super) fn ran_out(
    rt: &Runtime<'_>,
    session: &mut Session,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
    why: RanOut,
) -> Result<TurnEnd, TurnError> {
    if why == RanOut::Repeats {
        let text = format!(
            "the turn ended early as max_steps: {} calls were refused as repeats \
             (loop.max_repeated_calls) and the model kept repeating",
            super::REFUSED_REPEATS_BEFORE_END
        );
        tracing::info!(session = %session.id(), "{text}");
        note(session, text)?;
    }
    // A stopped turn says nothing more: the owner, a budget or the shutdown stopped it.
    if stop.is_set() {
        return Ok(TurnEnd::MaxSteps);
    }
    let step_limit = match why {
        RanOut::MaxSteps => "the turn reached loop.max_steps",
        RanOut::Repeats => "the turn ended on repeats",
    };
    note(
        session,
        format!(
            "{step_limit}; the model is asked for a last answer with no tools offered, its \
             repeated calls left out, no code fence allowed and, for this call only, the \
             instruction: {}",
            instruction(turn_request(session))
        ),
    )?;
    match last_word(rt, session, stop, on_event) {
        Ok(None) => Ok(TurnEnd::MaxSteps),
        Ok(Some(no_answer)) => {
            tracing::info!(session = %session.id(), "no last answer: {no_answer}");
            note(session, format!("no last answer: {no_answer}"))?;
            Ok(TurnEnd::MaxSteps)
        }
        Err(e) => Err(e),
    }
}

/// After a step that refused a repeat (the model asked again for a result it has): one call
/// with no tools and [`LAST_WORD_INSTRUCTION`], as the last word makes. Its answer ends the
/// turn `done` (returned); with none (a note says why) the turn goes on with its tools.
pub(super) fn after_repeat(
    rt: &Runtime<'_>,
    session: &mut Session,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<Option<TurnEnd>, TurnError> {
    note(
        session,
        format!(
            "a repeat was refused; the model is asked for its answer with no tools offered, its \
             repeated calls left out, no code fence allowed and, for this call only, the \
             instruction: {}",
            instruction(turn_request(session))
        ),
    )?;
    match last_word(rt, session, stop, on_event)? {
        None => Ok(Some(TurnEnd::Done)),
        Some(no_answer) => {
            note(session, format!("no answer after the repeat: {no_answer}"))?;
            Ok(None)
        }
    }
}

/// The last model call and its answer appended; `Ok(Some(why))` when there is no answer.
/// Only a record the log refused is an error.
fn last_word(
    rt: &Runtime<'_>,
    session: &mut Session,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<Option<String>, TurnError> {
    // Room for the call as for any model call of the turn (what that spends is the turn's).
    let work = TurnWork::new(rt.meter, stop);
    let room = compact::before_call(
        &Runtime {
            meter: &work,
            ..*rt
        },
        session,
    );
    match room {
        Ok(()) => {}
        Err(crate::baseline::BaselineError::Store(e)) => return Err(TurnError::Store(e)),
        Err(e) => return Ok(Some(e.to_string())),
    }
    if stop.is_set() {
        return Ok(Some(describe(&stop.end())));
    }
    let mut request = main_request(rt, session)?;
    // No tools: the model cannot call any; llama-server gets no `tools` key. Nor the turn's
    // repeats, nor a code fence to write a call in (`last_request`'s measurements).
    request.tools.clear();
    request.messages = without_repeats(std::mem::take(&mut request.messages));
    request.messages.push(ChatMessage::User {
        content: instruction(turn_request(session)),
    });
    request.banned = vec![LAST_WORD_BANNED.to_string()];
    let (completion, model_us) = match model_call(rt, session, &request, stop, on_event) {
        Ok(Ok(done)) => done,
        Ok(Err(end)) => return Ok(Some(describe(&end))),
        Err(TurnError::Store(e)) => return Err(TurnError::Store(e)),
        // Context full included: this call is not retried after a compaction.
        Err(e) => return Ok(Some(e.to_string())),
    };
    model_done(completion.usage, completion.timings, model_us, on_event);
    // An answer cut short because a budget left it no more tokens is no answer.
    if completion.finish_reason == FINISH_LENGTH && stop.is_set() {
        return Ok(Some(format!(
            "the answer was cut: {}",
            describe(&stop.end())
        )));
    }
    let content = completion.content.unwrap_or_default();
    if content.trim().is_empty() {
        return Ok(Some("the model's answer was empty".to_string()));
    }
    if only_calls(&content) {
        return Ok(Some(
            "the model answered with tool calls only, and none was offered".to_string(),
        ));
    }
    // Tool calls the model made anyway are dropped: none was offered, and none runs. The
    // turn's end follows at once and syncs both.
    session.append_synced_with_next(LogRecord::Assistant {
        time: Timestamp::now(),
        content,
        reasoning: completion.reasoning,
        tool_calls: Vec::new(),
        // Its prompt had no tools array, so its usage would understate the next prompt's,
        // which `compact` bounds from the last recorded usage: left out, the bound starts
        // from the answer before and counts this one's bytes.
        usage: None,
    })?;
    Ok(None)
}

/// Whether `content` is nothing but tool calls written as text, as a model that was offered
/// no tools writes them (one JSON object with a `name` a line, Qwen's `<tool_call>` tags
/// around them or not): that is no answer for the owner.
fn only_calls(content: &str) -> bool {
    let mut calls = 0;
    for line in content.lines().map(str::trim) {
        // Our Qwen template's call markup is a ```json fence (config/templates).
        if line.is_empty()
            || line == TOOL_CALL_OPEN
            || line == TOOL_CALL_CLOSE
            || line == "```"
            || line == "```json"
        {
            continue;
        }
        let line = line
            .trim_start_matches(TOOL_CALL_OPEN)
            .trim_end_matches(TOOL_CALL_CLOSE);
        match serde_json::from_str::<serde_json::Value>(line) {
            Ok(serde_json::Value::Object(call)) if call.contains_key("name") => calls += 1,
            _ => return false,
        }
    }
    calls > 0
}

/// Why the last call gave no answer, when it ended the way a turn ends.
fn describe(end: &TurnEnd) -> String {
    match end {
        TurnEnd::Cancelled => "the turn was cancelled".to_string(),
        TurnEnd::Interrupted => "loopd is shutting down".to_string(),
        TurnEnd::Budget { message, .. } => format!("a budget was reached ({message})"),
        TurnEnd::Failed { reason } => format!("the model call failed ({reason})"),
        TurnEnd::Done | TurnEnd::MaxSteps => "the call ended without an answer".to_string(),
    }
}

/// The owner's request of the turn: the log's last user record.
fn turn_request(session: &Session) -> Option<&str> {
    session.records().iter().rev().find_map(|r| match r {
        LogRecord::User { content, .. } => Some(content.as_str()),
        _ => None,
    })
}

/// Appends a note for people reading the log.
fn note(session: &mut Session, text: String) -> Result<(), TurnError> {
    session.append(LogRecord::Note {
        time: Timestamp::now(),
        text,
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_of_tool_calls_as_text_is_no_answer_and_one_with_words_is() {
        assert!(only_calls(r#"{"name":"clock","arguments":{}}"#));
        assert!(only_calls(
            "<tool_call>\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \".\"}}\n</tool_call>"
        ));
        assert!(only_calls(
            "<tool_call>{\"name\":\"a\"}</tool_call>\n{\"name\":\"b\"}\n"
        ));
        assert!(!only_calls("I listed the directory: it holds a.txt."));
        assert!(!only_calls(
            "{\"name\":\"clock\",\"arguments\":{}}\nThe clock said ten."
        ));
        assert!(!only_calls("{\"answer\": 42}"));
        assert!(!only_calls("\n"));
    }
}
