//! The bodies of loopd's usage route (`GET /v1/usage`) and the day's usage in `GET /v1/status`:
//! what the model and the tools cost, per session and per day, from loopd's usage accounts.

use bxcore::SessionId;
use serde::{Deserialize, Serialize};

/// What some work cost: the sums of its model calls (every slot: main, background, subagent),
/// tool calls and turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageTotals {
    /// Turns that ended.
    pub turns: u64,
    /// Model calls made.
    pub model_calls: u64,
    /// Prompt tokens the model server evaluated (llama-server's `timings.prompt_n`): what
    /// costs time.
    pub evaluated_tokens: u64,
    /// Prompt tokens served from the slot's cache (`timings.cache_n`).
    pub cached_tokens: u64,
    /// Tokens generated (`timings.predicted_n`, or the usage's `completion_tokens`).
    pub generated_tokens: u64,
    /// Time spent in model calls, in milliseconds (wall time as loopd measured it).
    pub model_ms: u64,
    /// Tool calls made (answered by loopd or by brokerd, any outcome).
    pub tool_calls: u64,
}

/// One session's share of a report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionUsage {
    /// The session.
    pub session: SessionId,
    /// What it cost.
    pub totals: UsageTotals,
}

/// The answer of `GET /v1/usage[?session=ID][&day=YYYY-MM-DD]`:
/// - no query: today, every session;
/// - `day`: that day, every session;
/// - `session`: that session, every day (its whole life);
/// - both: that session on that day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageReport {
    /// The day reported (`YYYY-MM-DD` in [`UsageReport::timezone`]); absent for a session's
    /// whole life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    /// The time zone days are counted in (`[budgets] timezone`, UTC by default).
    pub timezone: String,
    /// The session reported; absent for every session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionId>,
    /// The sums.
    pub totals: UsageTotals,
    /// Every session's share when no session was asked for, largest generated first; empty
    /// otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionUsage>,
}

/// Today's usage, as `GET /v1/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageToday {
    /// Today (`YYYY-MM-DD` in `timezone`).
    pub day: String,
    /// The time zone days are counted in.
    pub timezone: String,
    /// Every session's sums today.
    pub totals: UsageTotals,
    /// `[budgets] max_generated_tokens_per_day`, when set: new tasks are refused (429) once
    /// `totals.generated_tokens` reaches it, until the day turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_generated_tokens_per_day: Option<u64>,
}
