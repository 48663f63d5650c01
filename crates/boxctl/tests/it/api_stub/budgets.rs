//! The stub's budget sessions: `budget`, whose turn stops at a budget, and `spent`, refused
//! because the day's budget is spent.

use bxcore::TurnEnd;

/// What `spent` is refused with (429, kind `budget`).
pub const SPENT: &str = "the day's budget is spent: 1200 tokens were generated today (UTC) \
                         by all sessions; max_generated_tokens_per_day is 1000; the day turns \
                         at 2025-06-02T00:00:00+00:00; new tasks are refused until then";

/// How `budget`'s turn ends.
pub fn stopped() -> TurnEnd {
    TurnEnd::Budget {
        budget: "max_tool_calls_per_turn".into(),
        message: "the turn asked for tool call 41; max_tool_calls_per_turn is 40".into(),
    }
}
