//! `[budgets]`: what one turn and one day may spend (`docs/budgets.md`), and the day the usage
//! accounts count in.

#[cfg(test)]
mod tests;

use super::schedules::{DEFAULT_TIMEZONE, parse_timezone};
use crate::zone::Zone;
use bxconfig::Problems;
use globset::{Glob, GlobSetBuilder};
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
    /// Checks the time zone, that no budget is 0 (leaving a key out is how a budget is
    /// turned off) and that every `[[budgets.sessions]]` entry's `match` is a glob.
    pub(super) fn check(&self, p: &mut Problems) {
        if let Err(e) = parse_timezone(&self.timezone) {
            p.push("budgets.timezone", e);
        }
        not_zero(
            p,
            "budgets.max_generated_tokens_per_day",
            self.max_generated_tokens_per_day,
        );
        self.turn.check("budgets", p);
        for (i, entry) in self.sessions.iter().enumerate() {
            let key = format!("budgets.sessions[{i}]");
            if let Err(why) = check_glob(&entry.matches) {
                p.push(format!("{key}.match"), why);
            }
            entry.turn.check(&key, p);
        }
    }

    /// The time zone of the budget's days: `timezone`, or UTC should it not parse (a config
    /// built by hand; a loaded one was checked).
    pub fn zone(&self) -> Zone {
        parse_timezone(&self.timezone).unwrap_or_else(|_| Zone::utc())
    }

    /// The turn budgets of session `id`: those of the first `[[budgets.sessions]]` entry
    /// whose `match` matches it, each key it leaves out taken from `[budgets]`; `[budgets]`'s
    /// own when no entry matches. The globs are compiled here, once per turn, and only when
    /// there are entries: the config stays plain data.
    pub fn for_session(&self, id: &str) -> TurnBudgets {
        if self.sessions.is_empty() {
            return self.turn;
        }
        let mut globs = GlobSetBuilder::new();
        // Which entry each glob in the set is: a glob that does not parse was refused when
        // the config was checked, and one that slips through (a config built by hand) is
        // left out, matching nothing rather than everything.
        let mut entries = Vec::with_capacity(self.sessions.len());
        for (i, entry) in self.sessions.iter().enumerate() {
            if let Ok(glob) = Glob::new(&entry.matches) {
                globs.add(glob);
                entries.push(i);
            }
        }
        let first = globs
            .build()
            .ok()
            .and_then(|set| set.matches(id).into_iter().min())
            .and_then(|n| entries.get(n))
            .and_then(|&i| self.sessions.get(i));
        match first {
            Some(entry) => entry.turn.or(self.turn),
            None => self.turn,
        }
    }
}

impl TurnBudgets {
    /// Each budget of `self`, or `fallback`'s where `self` has none.
    pub fn or(self, fallback: TurnBudgets) -> TurnBudgets {
        TurnBudgets {
            max_generated_tokens_per_turn: self
                .max_generated_tokens_per_turn
                .or(fallback.max_generated_tokens_per_turn),
            max_prompt_tokens_per_turn: self
                .max_prompt_tokens_per_turn
                .or(fallback.max_prompt_tokens_per_turn),
            max_turn_ms: self.max_turn_ms.or(fallback.max_turn_ms),
            max_tool_calls_per_turn: self
                .max_tool_calls_per_turn
                .or(fallback.max_tool_calls_per_turn),
        }
    }

    /// Whether any budget is set.
    pub fn any(&self) -> bool {
        *self != TurnBudgets::default()
    }

    /// No budget under `section` is 0.
    fn check(&self, section: &str, p: &mut Problems) {
        let keys = [
            (
                "max_generated_tokens_per_turn",
                self.max_generated_tokens_per_turn,
            ),
            (
                "max_prompt_tokens_per_turn",
                self.max_prompt_tokens_per_turn,
            ),
            ("max_turn_ms", self.max_turn_ms),
            ("max_tool_calls_per_turn", self.max_tool_calls_per_turn),
        ];
        for (name, value) in keys {
            not_zero(p, &format!("{section}.{name}"), value);
        }
    }
}

/// A budget of 0 would refuse everything: almost surely a mistake for "no budget", which is
/// said by leaving the key out.
fn not_zero(p: &mut Problems, key: &str, value: Option<u64>) {
    if value == Some(0) {
        p.push(
            key,
            "must be at least 1; leave it out for no budget (0 would stop every turn at once)",
        );
    }
}

/// `glob` is a glob on session ids (`globset` syntax), and not empty.
fn check_glob(glob: &str) -> Result<(), String> {
    if glob.trim().is_empty() {
        return Err("must not be empty: give a glob on the session id, e.g. \"task-*\"".into());
    }
    Glob::new(glob)
        .map(|_| ())
        .map_err(|e| format!("is not a glob ({e}): {glob:?}"))
}
