//! The label values of loopd's metrics that are fixed words: slot roles, turn ends, refusals,
//! budgets, and the tool label of what the registry does not know.

use bxcore::TurnEnd;

/// The tool label of a call to a tool the turn's registry does not know.
pub const UNKNOWN_TOOL: &str = "unknown";

/// The budgets a turn can end at: `loopd_budget_stops_total`'s label values (any other name
/// counts as `unknown`).
pub const BUDGET_KEYS: [&str; 5] = [
    "max_generated_tokens_per_turn",
    "max_prompt_tokens_per_turn",
    "max_turn_ms",
    "max_tool_calls_per_turn",
    "max_generated_tokens_per_day",
];

/// Which slot a model call used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A turn's own call.
    Main,
    /// Summaries and compaction.
    Background,
    /// A subagent's turn.
    Subagent,
}

impl Role {
    /// Every role, in [`Role::index`] order.
    pub(super) const ALL: [Role; 3] = [Role::Main, Role::Background, Role::Subagent];

    /// Its label value.
    pub fn word(self) -> &'static str {
        match self {
            Role::Main => "main",
            Role::Background => "background",
            Role::Subagent => "subagent",
        }
    }

    /// Its place in [`Role::ALL`].
    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// Why a task was refused at submission (`loopd_tasks_refused_total`'s `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Its session's queue was full (409).
    Busy,
    /// Too many tasks wait across sessions (429, `[api] max_waiting_tasks`).
    TooManyWaiting,
    /// The day's budget is spent (429, `[budgets] max_generated_tokens_per_day`).
    DayBudget,
}

impl Refusal {
    /// Every reason, in declaration order (`as usize`).
    pub(super) const ALL: [Refusal; 3] =
        [Refusal::Busy, Refusal::TooManyWaiting, Refusal::DayBudget];

    /// Its label value.
    pub fn word(self) -> &'static str {
        match self {
            Refusal::Busy => "busy",
            Refusal::TooManyWaiting => "too_many_waiting",
            Refusal::DayBudget => "day_budget",
        }
    }
}

/// Every turn end's label value.
pub const END_WORDS: [&str; 6] = [
    "done",
    "cancelled",
    "failed",
    "max_steps",
    "interrupted",
    "budget",
];

/// A turn end's label value (one of [`END_WORDS`]).
pub fn end_word(end: &TurnEnd) -> &'static str {
    match end {
        TurnEnd::Done => "done",
        TurnEnd::Cancelled => "cancelled",
        TurnEnd::Failed { .. } => "failed",
        TurnEnd::MaxSteps => "max_steps",
        TurnEnd::Interrupted => "interrupted",
        TurnEnd::Budget { .. } => "budget",
    }
}
