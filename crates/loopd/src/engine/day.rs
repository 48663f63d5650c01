//! The day budget at the engine's door (`[budgets] max_generated_tokens_per_day`): the refusal
//! (429) of a new task, or of a waiting one whose turn comes, once the day's tokens are spent.
//! The day's figure is the usage accounts' (`meter`): durable across restarts, and current as
//! soon as a model call's `model_done` event has been counted, before anyone else hears of it.

use super::Inner;
use crate::api::ApiFailure;
use crate::budget::day::refusal;
use chrono::Utc;

impl Inner {
    /// Tokens generated today by every session: what the day budget is checked against.
    pub(super) fn generated_today(&self) -> u64 {
        self.parts.meter.generated_today()
    }

    /// Why a task may not start now: the day's budget is spent (429, naming the budget, the
    /// figure and when the day turns). The one place a task is refused for the day budget;
    /// `Engine::submit_task` counts the refusal (`loopd_tasks_refused_total`).
    pub(super) fn day_refusal(&self) -> Option<ApiFailure> {
        let why = refusal(&self.parts.cfg.budgets, self.generated_today(), Utc::now())?;
        tracing::info!("task refused: {why}");
        Some(ApiFailure::OverBudget(why))
    }
}
