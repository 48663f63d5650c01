//! `[budgets]`: what one turn and one day may spend (`docs/budgets.md`), and the day the usage
//! accounts count in.

use super::schedules::{DEFAULT_TIMEZONE, parse_timezone};
use bxconfig::Problems;
use serde::{Deserialize, Serialize};

/// `[budgets]`. Every budget is off (`None`) by default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budgets {
    /// The IANA time zone whose calendar days the day budget and the usage accounts count
    /// (`"UTC"` by default).
    pub timezone: String,
    /// Tokens every session may generate in one day, in all; then new tasks are refused (429)
    /// until the day turns.
    pub max_generated_tokens_per_day: Option<u64>,
    /// The budgets of one turn, for every session not matched by `[[budgets.sessions]]`.
    #[serde(flatten)]
    pub turn: TurnBudgets,
    /// Per-session overrides, by glob on the session id; the first match wins.
    pub sessions: Vec<SessionBudgets>,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets {
            timezone: DEFAULT_TIMEZONE.to_string(),
            max_generated_tokens_per_day: None,
            turn: TurnBudgets::default(),
            sessions: Vec::new(),
        }
    }
}

/// What one turn (its subagents included) may spend. `None`: no budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TurnBudgets {
    /// Tokens the model may generate in the turn.
    pub max_generated_tokens_per_turn: Option<u64>,
    /// Prompt tokens llama-server may evaluate in the turn (cached ones are free).
    pub max_prompt_tokens_per_turn: Option<u64>,
    /// How long the turn may run, in milliseconds.
    pub max_turn_ms: Option<u64>,
    /// Tool calls the turn may make.
    pub max_tool_calls_per_turn: Option<u64>,
}

/// `[[budgets.sessions]]`: the turn budgets of the sessions whose id matches `match`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionBudgets {
    /// A glob on the session id (`globset` syntax): `task-*`, `heartbeat`, `report-*`.
    #[serde(rename = "match")]
    pub matches: String,
    /// The budgets; a key left out falls back to `[budgets]`'s.
    #[serde(flatten)]
    pub turn: TurnBudgets,
}

impl Budgets {
    /// Checks the time zone. (Budget issue helpers extend this: globs, zero budgets.)
    pub(super) fn check(&self, p: &mut Problems) {
        if let Err(e) = parse_timezone(&self.timezone) {
            p.push("budgets.timezone", e);
        }
    }
}
