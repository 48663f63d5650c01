//! A turn: model calls and tool calls over a session until the model answers without tool
//! calls, the step limit is reached, or the turn is stopped (SPEC 3). A turn that runs out of
//! steps still asks the model for a last answer, with no tools (`last_word`).
//!
//! Turns are blocking code on their own thread: the llama client and the tool port block.
//! Every step is appended to the session log (durably) before the next one starts, so a crash
//! loses at most the step in flight, and the next open ends the turn as `interrupted`.

use crate::baseline::{self, BaselineError};
use crate::budget::ModelSpend;
use crate::compact;
use crate::llama::{ChatEvent, ChatRequest, Completion, InferError};
use crate::runtime::TurnWork;
use crate::session::{Session, StoreError};
use bxcore::{LogRecord, TaskId, Timestamp, TurnEnd, TurnEvent};
use proto::api::OverheardText;
use std::time::Instant;

mod approval;
mod call;
mod last_request;
mod last_word;
mod overheard;
mod provenance;
mod repeats;

pub use crate::baseline::CUT_CALL;
pub use crate::llama::FINISH_LENGTH;
pub use crate::outcome::CallOutcome;
pub use crate::runtime::{
    Children, Meter, NO_OWNER, NoMeter, NoOwner, Owner, OwnerReply, Runtime, Stop,
};
pub use approval::{
    BUDGET_REACHED, CANCELLED, NO_REASON, NOTIFICATION_ARGUMENT_CHARS, SHUTTING_DOWN,
};
pub use call::{DO_NOT_RETRY, RETRY_WITH_VALID_ARGUMENTS, run_call};
pub use last_request::{
    LAST_WORD_BANNED, LAST_WORD_REQUEST_MAX_CHARS, instruction as last_word_instruction,
};
pub use last_word::LAST_WORD_INSTRUCTION;
use last_word::RanOut;
pub use overheard::OVERHEARD_CLASS;
/// The record of one overheard message, written now.
pub fn overheard_record(heard: &OverheardText) -> LogRecord {
    overheard::record(Timestamp::now(), heard)
}
pub use provenance::{
    ARGUMENTS_NOT_JSON, NOT_OWNER_GIVEN, OWNER_WORDS_UNREADABLE, QUOTED_PATH_MAX_CHARS, owner_texts,
};
pub use repeats::{REFUSED_REPEATS_BEFORE_END, REPEAT_RESULT_EXCERPT_CHARS, Repeats};

/// Why a turn could not run to an end of its own.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The prompt no longer fits the slot: the session needs compaction.
    #[error("the session's context is full: {0}")]
    SessionFull(String),
    /// The session log refused a record; the turn stopped where the log stops.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The epoch's baseline could not be made.
    #[error(transparent)]
    Baseline(#[from] BaselineError),
}

/// Appends the user record of a new turn; once this returns the task is durable.
pub fn start_turn(session: &mut Session, text: &str) -> Result<u64, StoreError> {
    start_task(session, text, None, &[])
}

/// [`start_turn`] for a task its client named `task_id`: the record keeps the id, so a later
/// submission of the same id finds this turn. What others said before it (`overheard`) is
/// written first, as untrusted records ([`overheard::record`]), synced with the task's.
pub fn start_task(
    session: &mut Session,
    text: &str,
    task_id: Option<&TaskId>,
    overheard: &[OverheardText],
) -> Result<u64, StoreError> {
    for record in overheard::new_records(session.records(), overheard) {
        session.append_synced_with_next(record)?;
    }
    let turn = session.last_turn() + 1;
    session.append(LogRecord::User {
        time: Timestamp::now(),
        turn,
        content: text.to_string(),
        task_id: task_id.cloned(),
    })?;
    Ok(turn)
}

/// Runs the open turn of `session` to its end, appends the turn end, and reports every step
/// through `on_event`; then does the background work after it ([`finish_turn`]). Returns how
/// the turn ended.
pub fn run_turn(
    rt: &Runtime<'_>,
    session: &mut Session,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<TurnEnd, TurnError> {
    let result = run_foreground(rt, session, stop, on_event);
    finish_turn(rt, session, &result);
    result
}

/// [`run_turn`] without the background work after the turn: the engine runs that
/// ([`finish_turn`]) once it has given back the main slot, so that one session's summaries
/// and compaction never keep another session's task waiting.
pub fn run_foreground(
    rt: &Runtime<'_>,
    session: &mut Session,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<TurnEnd, TurnError> {
    let Some(turn) = session.open_turn() else {
        return Err(TurnError::Store(StoreError::BadRecord {
            session: session.id().clone(),
            kind: "turn_end",
            why: "no turn is open: start_turn first".to_string(),
        }));
    };
    on_event(&TurnEvent::Started {
        session: session.id().clone(),
        turn,
    });
    // A top-level turn begins its budgets (and the `max_turn_ms` timer, stopped when this
    // returns); a subagent's turn spends from its parent's, which its stop shares.
    let _turn_timer = match session.root_turn() {
        None => stop.spend().begin(
            &rt.cfg.budgets,
            session.id().as_str(),
            rt.meter.generated_today(),
            rt.blocking.handle(),
        ),
        Some(_) => None,
    };
    let mut result = steps(rt, session, stop, on_event);
    // Context full: summaries, compaction, and the turn runs once more in the new epoch
    // (its request re-stated after the carry, see `compact`). What they spend is the turn's.
    let work = TurnWork::new(rt.meter, stop);
    if matches!(result, Err(TurnError::SessionFull(_)))
        && compact::make_room(
            &Runtime {
                meter: &work,
                ..*rt
            },
            session,
        )
    {
        result = steps(rt, session, stop, on_event);
    }
    let end = match &result {
        Ok(end) => end.clone(),
        Err(TurnError::SessionFull(message)) => TurnEnd::Failed {
            reason: format!("the session's context is full: {message}"),
        },
        Err(e) => TurnEnd::Failed {
            reason: e.to_string(),
        },
    };
    // A turn whose log refused a record cannot record its end either; the next open ends
    // it as interrupted.
    if !matches!(result, Err(TurnError::Store(_))) {
        session.append(LogRecord::TurnEnd {
            time: Timestamp::now(),
            turn,
            end: end.clone(),
        })?;
    }
    on_event(&TurnEvent::Ended {
        turn,
        end: end.clone(),
        context: baseline::context_labels(session),
    });
    result
}

/// The steps of a turn: model call, tool calls, again.
fn steps(
    rt: &Runtime<'_>,
    session: &mut Session,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<TurnEnd, TurnError> {
    baseline::ensure(session, rt.cfg, rt.system, rt.registry)?;
    let mut repeats = Repeats::new(
        rt.cfg.r#loop.max_repeated_calls,
        rt.cfg.r#loop.refuse_repeat_at_once,
    );
    // Room made inside the turn is spent by the turn.
    let work = TurnWork::new(rt.meter, stop);
    for _ in 0..rt.cfg.r#loop.max_steps {
        if stop.is_set() {
            return Ok(stop.end());
        }
        compact::before_call(
            &Runtime {
                meter: &work,
                ..*rt
            },
            session,
        )?;
        let request = main_request(rt, session)?;
        let (completion, model_us) = match model_call(rt, session, &request, stop, on_event)? {
            Ok(done) => done,
            Err(end) => return Ok(end),
        };
        let calls = completion.tool_calls.clone();
        // A reply cut at the token limit may end inside a call: its arguments are a fragment,
        // so none of that reply's calls is run.
        let cut = completion.finish_reason == FINISH_LENGTH;
        let record = LogRecord::Assistant {
            time: Timestamp::now(),
            content: completion.content.unwrap_or_default(),
            reasoning: completion.reasoning,
            tool_calls: completion.tool_calls,
            usage: Some(completion.usage),
        };
        if calls.is_empty() {
            // The answer: the turn's end follows at once and syncs both.
            session.append_synced_with_next(record)?;
        } else {
            session.append(record)?;
        }
        model_done(completion.usage, completion.timings, model_us, on_event);
        if calls.is_empty() {
            // An answer cut short because a budget left it no more tokens is no answer.
            return Ok(match stop.end() {
                end @ TurnEnd::Budget { .. } if cut => end,
                _ => TurnEnd::Done,
            });
        }
        let refused_before = repeats.refused();
        repeats.step();
        for tool_call in &calls {
            if stop.is_set() {
                return Ok(stop.end());
            }
            let call = session.next_call();
            on_event(&TurnEvent::ToolCall {
                call,
                tool_call: tool_call.clone(),
            });
            let outcome = if cut {
                CallOutcome::not_run(CUT_CALL)
            } else if let Some(refused) = repeats.check(tool_call) {
                refused
            } else if let Err(why) = stop.spend().tool_call() {
                // Past `max_tool_calls_per_turn` (counting the subagents' calls): not run,
                // and the turn is stopped, so it ends `budget` at the next step.
                CallOutcome::not_run(&why)
            } else {
                let outcome = run_call(rt, session, call, tool_call, stop, on_event);
                // A repeat refused later quotes this result.
                repeats.ran(tool_call, &outcome);
                outcome
            };
            session.append(outcome.record(call, &tool_call.id))?;
            on_event(&outcome.event(call));
            // A call that waited for the owner gave the main slot back, and ran (approved)
            // without it: taken again only now that its result is durable, before the next
            // call or model call. A turn stopped meanwhile goes no further.
            if !rt.owner.retake_slot() {
                return Ok(stop.end());
            }
        }
        if repeats.give_up() {
            return last_word::ran_out(rt, session, stop, on_event, RanOut::Repeats);
        }
        // A step that refused a repeat: the model has the result it asked for again, so it is
        // asked for its answer with no tools (issue 34: on the default model a read was
        // repeated after its result until the step limit, `docs/evals.md`).
        if repeats.refused() > refused_before
            && let Some(end) = last_word::after_repeat(rt, session, stop, on_event)?
        {
            return Ok(end);
        }
    }
    last_word::ran_out(rt, session, stop, on_event, RanOut::MaxSteps)
}

/// The request of a turn's model call on the main slot: the epoch's messages and tools array.
fn main_request(rt: &Runtime<'_>, session: &Session) -> Result<ChatRequest, TurnError> {
    let Some(baseline) = session.current_baseline() else {
        return Err(TurnError::Store(StoreError::Poisoned(session.id().clone())));
    };
    Ok(ChatRequest {
        slot: rt.models.main.slot,
        messages: compact::epoch_messages(session, baseline),
        tools: baseline.tools.clone(),
        thinking: rt.cfg.r#loop.thinking,
        banned: Vec::new(),
    })
}

/// Reports a finished model call (`ModelDone`): its usage reaches the meter.
fn model_done(
    usage: bxcore::Usage,
    timings: Option<crate::llama::Timings>,
    model_us: u64,
    on_event: &mut dyn FnMut(&TurnEvent),
) {
    on_event(&TurnEvent::ModelDone {
        usage,
        model_us,
        timings: timings.map(Into::into),
    });
}

/// One model call of `request`, and how long the call itself took (µs).
/// `Ok(Err(end))`: the turn ends without an answer. A call stopped after some of its answer
/// had streamed leaves that part in the log ([`LogRecord::PartialAnswer`]).
fn model_call(
    rt: &Runtime<'_>,
    session: &mut Session,
    request: &ChatRequest,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<Result<(Completion, u64), TurnEnd>, TurnError> {
    // The call may generate no more than the turn's and the day's budgets leave; none left,
    // and the turn was stopped at its budget.
    let capped;
    let main = &rt.models.main.client;
    let client = match stop.spend().tokens_left(rt.meter.generated_today()) {
        Some(0) => return Ok(Err(stop.end())),
        Some(left) if left < u64::from(main.options().max_tokens.unwrap_or(u32::MAX)) => {
            capped = main.with_max_tokens(u32::try_from(left).unwrap_or(u32::MAX));
            &capped
        }
        _ => main,
    };
    // What has streamed, kept should the call be stopped: the client retries only tries
    // that streamed nothing, so this is all one try's.
    let (mut content, mut reasoning) = (String::new(), String::new());
    let mut chunks: u64 = 0;
    let mut forward = |event: &ChatEvent| {
        match event {
            ChatEvent::Content(text) => {
                content.push_str(text);
                chunks += 1;
            }
            ChatEvent::Reasoning(text) => {
                reasoning.push_str(text);
                chunks += 1;
            }
            ChatEvent::Attempt { .. } => {}
        }
        on_event(&turn_event(event));
    };
    let started = Instant::now();
    let answer = rt
        .blocking
        .wait(client.chat_with_retry(request, &mut forward, stop.token()));
    let model_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    if answer.is_err() && chunks > 0 {
        streamed_only(rt, stop, chunks, model_us, on_event);
    }
    match answer {
        Ok(completion) => {
            // Counted against the top-level turn's budgets; one reached stops the turn.
            stop.spend()
                .model_call(ModelSpend::of(&completion), rt.meter.generated_today());
            Ok(Ok((completion, model_us)))
        }
        Err(InferError::Cancelled) => {
            if !content.is_empty() || !reasoning.is_empty() {
                session.append(LogRecord::PartialAnswer {
                    time: Timestamp::now(),
                    content,
                    reasoning: (!reasoning.is_empty()).then_some(reasoning),
                })?;
            }
            Ok(Err(stop.end()))
        }
        Err(InferError::SessionFull { message, .. }) => Err(TurnError::SessionFull(message)),
        Err(e) => Ok(Err(TurnEnd::Failed {
            reason: e.to_string(),
        })),
    }
}

/// Counts a model call that streamed `chunks` chunks of its answer and then was stopped or
/// failed: no usage came back, but the tokens were generated all the same, so they count in
/// the turn's spend and reach the meter (a `ModelDone` without timings), or a cut call would
/// escape the day's budget and the accounts. llama-server streams about one token a content or
/// reasoning chunk: `chunks` is an estimate of the tokens generated; the prompt's tokens are
/// not known and count as none.
fn streamed_only(
    rt: &Runtime<'_>,
    stop: &Stop,
    chunks: u64,
    model_us: u64,
    on_event: &mut dyn FnMut(&TurnEvent),
) {
    let usage = bxcore::Usage {
        prompt_tokens: 0,
        completion_tokens: chunks,
        cached_tokens: 0,
    };
    // First the meter (through the event), then the spend: the day's figure then holds it.
    on_event(&TurnEvent::ModelDone {
        usage,
        model_us,
        timings: None,
    });
    stop.spend().model_call(
        ModelSpend::counted(&usage, None),
        rt.meter.generated_today(),
    );
}

/// A llama client event as a turn event.
fn turn_event(event: &ChatEvent) -> TurnEvent {
    match event {
        ChatEvent::Content(text) => TurnEvent::Content { text: text.clone() },
        ChatEvent::Reasoning(text) => TurnEvent::Reasoning { text: text.clone() },
        ChatEvent::Attempt {
            attempt,
            delay_ms,
            error,
        } => TurnEvent::Retry {
            attempt: *attempt,
            delay_ms: *delay_ms,
            error: error.clone(),
        },
    }
}

/// After a turn: summaries of opted-in results, then compaction when it is due, both on the
/// background slot (the engine runs this after giving back the main slot). A context-full
/// turn was already summarised and compacted (`compact::make_room`) before its one retry.
pub fn finish_turn(rt: &Runtime<'_>, session: &mut Session, result: &Result<TurnEnd, TurnError>) {
    match result {
        Ok(end) => {
            tracing::debug!(session = %session.id(), ?end, "turn finished");
            let summarised = match end {
                // What the turn fetched must not buy model calls past the budget that ended it.
                TurnEnd::Budget { budget, .. } => crate::summarise::skip(
                    rt.cfg,
                    session,
                    &format!("not tried: the turn ended at its budget {budget}"),
                ),
                _ => crate::summarise::missing(rt, session),
            };
            if let Err(e) = summarised {
                tracing::warn!(session = %session.id(), error = %e, "loopd: tool summary");
            }
            if let Some(usage) = session.last_usage()
                && compact::due(&usage, rt.cfg.compact.threshold, rt.n_ctx)
                && let Err(e) = compact::compact_session(session, rt)
            {
                compact::log_failure(session, &e);
            }
        }
        Err(e) => tracing::warn!(session = %session.id(), error = %e, "turn failed"),
    }
}
