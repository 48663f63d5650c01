//! The owner's budgets in force (`[budgets]`, `docs/budgets.md`): what a top-level turn and its
//! subagents spent together ([`Spend`]), what they may still spend, and the end of the whole
//! turn once one budget is reached.
//!
//! A turn's [`Spend`] is shared by its stop and every child stop (`runtime::Stop::child`), so
//! a subagent's model and tool calls count against the turn that started it: a turn cannot
//! escape its budget by handing the work to children. Reaching a budget cancels the top-level
//! turn's token, so every wait of the turn and of its children (a model call streaming, an
//! approval, a call to brokerd) ends at once, and the stop's end is `TurnEnd::Budget`.

pub mod day;
#[cfg(test)]
mod tests;

use crate::config::{Budgets, TurnBudgets};
use crate::llama::Completion;
use crate::zone::Zone;
use bxcore::{ModelTimings, Usage};
use chrono::{NaiveDate, Utc};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

pub use day::MAX_GENERATED_TOKENS_PER_DAY;

/// The budget of tokens a turn may generate (its config key).
pub const MAX_GENERATED_TOKENS_PER_TURN: &str = "max_generated_tokens_per_turn";
/// The budget of prompt tokens llama-server may evaluate in a turn.
pub const MAX_PROMPT_TOKENS_PER_TURN: &str = "max_prompt_tokens_per_turn";
/// The budget of a turn's time, in milliseconds.
pub const MAX_TURN_MS: &str = "max_turn_ms";
/// The budget of a turn's tool calls.
pub const MAX_TOOL_CALLS_PER_TURN: &str = "max_tool_calls_per_turn";

/// What one model call spent, as the budgets count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelSpend {
    /// Tokens generated.
    pub generated: u64,
    /// Prompt tokens evaluated: llama-server's `timings.prompt_n`, or without timings the
    /// prompt's tokens less those served from the cache. Cached tokens cost no time.
    pub evaluated: u64,
}

impl ModelSpend {
    /// What `completion` spent.
    pub fn of(completion: &Completion) -> ModelSpend {
        let timings: Option<ModelTimings> = completion.timings.map(Into::into);
        ModelSpend::counted(&completion.usage, timings.as_ref())
    }

    /// What a call whose answer reported `usage` and `timings` spent: generated, the larger of
    /// `timings.predicted_n` and `usage.completion_tokens` (they may disagree, and a budget
    /// must not be escaped by the smaller); evaluated, `timings.prompt_n`, or without timings
    /// the prompt less its cached tokens. The one definition: the usage accounts and the
    /// metrics count a call with it too (`meter::counts`).
    pub fn counted(usage: &Usage, timings: Option<&ModelTimings>) -> ModelSpend {
        match timings {
            Some(t) => ModelSpend {
                generated: usage.completion_tokens.max(t.predicted_n),
                evaluated: t.prompt_n,
            },
            None => ModelSpend {
                generated: usage.completion_tokens,
                evaluated: usage.prompt_tokens.saturating_sub(usage.cached_tokens),
            },
        }
    }
}

/// A budget a turn reached: how it ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reached {
    /// The budget's config key.
    pub budget: &'static str,
    /// What was reached, naming the budget and the figure.
    pub message: String,
}

/// What a top-level turn and its subagents spent, and the budgets it runs under: shared by
/// the turn's stop and its children's.
#[derive(Debug)]
pub struct Spend {
    /// The top-level turn's token: cancelled when a budget is reached.
    root: CancellationToken,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The budgets, once the top-level turn began ([`Spend::begin`]); none: nothing counts.
    armed: Option<Armed>,
    generated: u64,
    evaluated: u64,
    tool_calls: u64,
    reached: Option<Reached>,
}

#[derive(Debug, Clone)]
struct Armed {
    turn: TurnBudgets,
    day: Option<DayBudget>,
}

/// The day budget as the turn began: its day, and the tokens generated that day before it.
#[derive(Debug, Clone)]
struct DayBudget {
    max: u64,
    zone: Zone,
    day: NaiveDate,
    base: u64,
}

impl Spend {
    /// The spend of the turn whose token is `root`: nothing spent, no budget yet.
    pub fn new(root: CancellationToken) -> Spend {
        Spend {
            root,
            state: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Begins a top-level turn of session `session` under `budgets` (its turn budgets as
    /// [`Budgets::for_session`] resolves them), `generated_today` tokens having been generated
    /// today: the counts start from 0, and when `max_turn_ms` is set a timer on `runtime`
    /// reaches it. The timer lives as long as the handle returned.
    pub fn begin(
        self: &Arc<Self>,
        budgets: &Budgets,
        session: &str,
        generated_today: u64,
        runtime: &tokio::runtime::Handle,
    ) -> Option<AbortOnDropHandle<()>> {
        let turn = budgets.for_session(session);
        let day = budgets.max_generated_tokens_per_day.map(|max| {
            let zone = budgets.zone();
            DayBudget {
                max,
                day: day::day_of(&zone, Utc::now()),
                zone,
                base: generated_today,
            }
        });
        let any = turn.any() || day.is_some();
        let started = Instant::now();
        let armed = Armed { turn, day };
        *self.lock() = State {
            armed: any.then_some(armed),
            ..State::default()
        };
        let max_ms = turn.max_turn_ms?;
        let spend = Arc::clone(self);
        let root = self.root.clone();
        Some(AbortOnDropHandle::new(runtime.spawn(async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(max_ms)) => {
                    let ran = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                    spend.reach(MAX_TURN_MS, format!("the turn ran for {ran} ms; {MAX_TURN_MS} is {max_ms}"));
                }
                () = root.cancelled() => {}
            }
        })))
    }

    /// The budget the turn reached, if it did.
    pub fn reached(&self) -> Option<Reached> {
        self.lock().reached.clone()
    }

    /// The turn reached `budget`: it ends, with `message`, and every wait of it and its
    /// children ends now. A turn already stopped (cancelled, shutting down, another budget)
    /// keeps the reason it had.
    fn reach(&self, budget: &'static str, message: String) {
        {
            let mut state = self.lock();
            if state.reached.is_some() || self.root.is_cancelled() {
                return;
            }
            tracing::info!(budget, %message, "a turn reached a budget");
            state.reached = Some(Reached { budget, message });
        }
        self.root.cancel();
    }

    /// The most tokens the next model call may generate, `generated_today` tokens having been
    /// generated today: what the turn's and the day's budgets leave, whichever is less; `None`
    /// when neither is set. At 0 the turn has reached the budget and is stopped.
    pub fn tokens_left(&self, generated_today: u64) -> Option<u64> {
        let (turn_left, day_left, reached) = {
            let state = self.lock();
            let armed = state.armed.as_ref()?;
            let turn_left = armed
                .turn
                .max_generated_tokens_per_turn
                .map(|max| (max.saturating_sub(state.generated), max));
            let day_left = armed.day.as_ref().map(|d| {
                let today = day_total(d, state.generated, generated_today);
                (d.max.saturating_sub(today), d, today)
            });
            let reached = match (turn_left, day_left) {
                (Some((0, max)), _) => Some(generated_reached(state.generated, max)),
                (_, Some((0, d, today))) => Some(day_reached(d, today)),
                _ => None,
            };
            (turn_left.map(|t| t.0), day_left.map(|d| d.0), reached)
        };
        if let Some((budget, message)) = reached {
            self.reach(budget, message);
        }
        match (turn_left, day_left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Counts a model call of the turn (or of a child); a budget it reaches stops the turn.
    pub fn model_call(&self, spent: ModelSpend, generated_today: u64) {
        let reached = {
            let mut state = self.lock();
            state.generated = state.generated.saturating_add(spent.generated);
            state.evaluated = state.evaluated.saturating_add(spent.evaluated);
            let Some(armed) = state.armed.as_ref() else {
                return;
            };
            let over = |max: Option<u64>, figure: u64| max.filter(|&max| figure >= max);
            if let Some(max) = over(armed.turn.max_generated_tokens_per_turn, state.generated) {
                Some(generated_reached(state.generated, max))
            } else if let Some(max) = over(armed.turn.max_prompt_tokens_per_turn, state.evaluated) {
                Some((
                    MAX_PROMPT_TOKENS_PER_TURN,
                    format!(
                        "llama-server evaluated {} prompt tokens in the turn; \
                         {MAX_PROMPT_TOKENS_PER_TURN} is {max}",
                        state.evaluated
                    ),
                ))
            } else {
                armed.day.as_ref().and_then(|d| {
                    let today = day_total(d, state.generated, generated_today);
                    (today >= d.max).then(|| day_reached(d, today))
                })
            }
        };
        if let Some((budget, message)) = reached {
            self.reach(budget, message);
        }
    }

    /// Counts a tool call the turn (or a child) is about to run. `Err(why)`: it would exceed
    /// `max_tool_calls_per_turn`, so it must not run; the turn is stopped, and `why` is the
    /// call's result.
    pub fn tool_call(&self) -> Result<(), String> {
        let message = {
            let mut state = self.lock();
            let max = state
                .armed
                .as_ref()
                .and_then(|a| a.turn.max_tool_calls_per_turn);
            match max {
                Some(max) if state.tool_calls >= max => format!(
                    "the turn asked for tool call {}; {MAX_TOOL_CALLS_PER_TURN} is {max}",
                    state.tool_calls.saturating_add(1)
                ),
                _ => {
                    state.tool_calls = state.tool_calls.saturating_add(1);
                    return Ok(());
                }
            }
        };
        self.reach(MAX_TOOL_CALLS_PER_TURN, message.clone());
        Err(format!(
            "Not run: the turn reached a budget ({message}). The turn ends here."
        ))
    }
}

/// The day's tokens as the turn sees them: what the meter says, or at least what was
/// generated before the turn plus what the turn generated, should the meter not have counted
/// the turn yet. Once the day turned during the turn, the meter's figure alone (the new day's).
fn day_total(d: &DayBudget, turn_generated: u64, generated_today: u64) -> u64 {
    if day::day_of(&d.zone, Utc::now()) == d.day {
        generated_today.max(d.base.saturating_add(turn_generated))
    } else {
        generated_today
    }
}

fn generated_reached(generated: u64, max: u64) -> (&'static str, String) {
    (
        MAX_GENERATED_TOKENS_PER_TURN,
        format!("the turn generated {generated} tokens; {MAX_GENERATED_TOKENS_PER_TURN} is {max}"),
    )
}

fn day_reached(d: &DayBudget, today: u64) -> (&'static str, String) {
    (
        MAX_GENERATED_TOKENS_PER_DAY,
        day::spent_message(&d.zone, d.max, today, Utc::now()),
    )
}
