//! The day budget at the engine's door (`[budgets] max_generated_tokens_per_day`): what the
//! day generated so far, and the refusal (429) of a new task, or of a waiting one whose turn
//! comes, once the day's tokens are spent.

use super::Inner;
use crate::api::ApiFailure;
use crate::budget::day::{day_of, refusal};
use crate::turn::Meter;
use bxcore::TurnEvent;
use chrono::{NaiveDate, Utc};
use chrono_tz::Tz;
use std::sync::Mutex;

/// The tokens this engine's turns (their subagents included) generated today, in the
/// budget's time zone, counted from the turns' `model_done` events. In memory: the durable count
/// across restarts is the usage accounts' (`Runtime::meter`); the engine takes whichever is
/// greater ([`Inner::generated_today`]).
#[derive(Debug)]
pub(super) struct DayTally {
    zone: Tz,
    count: Mutex<(NaiveDate, u64)>,
}

impl DayTally {
    /// A tally of days in `zone`, nothing counted.
    pub(super) fn new(zone: Tz) -> DayTally {
        DayTally {
            zone,
            count: Mutex::new((day_of(zone, Utc::now()), 0)),
        }
    }

    /// Counts the tokens of `event` when it is a model call's end (a subagent's included).
    pub(super) fn count(&self, event: &TurnEvent) {
        match event {
            TurnEvent::ModelDone { usage, timings, .. } => {
                let predicted = timings.as_ref().map_or(0, |t| t.predicted_n);
                self.add(usage.completion_tokens.max(predicted));
            }
            TurnEvent::Subagent { event, .. } => self.count(event),
            _ => {}
        }
    }

    /// Counts `tokens` generated now; a new day starts from 0.
    pub(super) fn add(&self, tokens: u64) {
        let today = day_of(self.zone, Utc::now());
        let mut count = self.count.lock().unwrap_or_else(|p| p.into_inner());
        if count.0 != today {
            *count = (today, 0);
        }
        count.1 = count.1.saturating_add(tokens);
    }
}

impl Meter for DayTally {
    fn generated_today(&self) -> u64 {
        let count = self.count.lock().unwrap_or_else(|p| p.into_inner());
        if count.0 == day_of(self.zone, Utc::now()) {
            count.1
        } else {
            0
        }
    }
}

impl Inner {
    /// Tokens generated today by every session: what the day budget is checked against.
    pub(super) fn generated_today(&self) -> u64 {
        self.day.generated_today()
    }

    /// Why a task may not start now: the day's budget is spent (429, naming the budget, the
    /// figure and when the day turns). The one place a task is refused for the day budget.
    pub(super) fn day_refusal(&self) -> Option<ApiFailure> {
        let why = refusal(&self.parts.cfg.budgets, self.generated_today(), Utc::now())?;
        tracing::info!("task refused: {why}");
        Some(ApiFailure::OverBudget(why))
    }
}
