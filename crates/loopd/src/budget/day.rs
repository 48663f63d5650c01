//! The budget's day (`docs/budgets.md`): a calendar day in `[budgets] timezone`, when it turns,
//! and what `max_generated_tokens_per_day` says once the day's tokens are spent.

use crate::config::Budgets;
use crate::zone::Zone;
use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};

/// The day budget's config key.
pub const MAX_GENERATED_TOKENS_PER_DAY: &str = "max_generated_tokens_per_day";
/// How far past midnight [`day_turns`] looks for a local time that exists, in minutes: a
/// change of clocks skips at most an hour or two of a day, never this much.
const MAX_SKIPPED_MINUTES: i64 = 180;
/// The step of that search, in minutes (Lord Howe's clocks move by half an hour).
const SKIP_STEP_MINUTES: i64 = 15;

/// The calendar day `now` falls on in `zone`.
pub fn day_of(zone: &Zone, now: DateTime<Utc>) -> NaiveDate {
    now.with_timezone(zone).date_naive()
}

/// When the day `now` falls on in `zone` turns: the next midnight there, or, where a change
/// of clocks skips midnight, the first local time after it that exists.
pub fn day_turns(zone: &Zone, now: DateTime<Utc>) -> DateTime<Zone> {
    let today = day_of(zone, now);
    let midnight = today
        .succ_opt()
        .and_then(|tomorrow| tomorrow.and_hms_opt(0, 0, 0));
    if let Some(midnight) = midnight {
        for minutes in (0..=MAX_SKIPPED_MINUTES).step_by(SKIP_STEP_MINUTES as usize) {
            let local = midnight + Duration::minutes(minutes);
            if let Some(at) = zone.from_local_datetime(&local).earliest() {
                return at;
            }
        }
    }
    // Past the calendar's end, or a zone that skips more than any does: a day from now.
    (now + Duration::days(1)).with_timezone(zone)
}

/// What the day budget says when `generated_today` tokens were generated today: `None` while
/// it leaves tokens (or there is none), else why, naming the budget, the figure and when the
/// day turns. A new task is refused with this (429); a running turn ends with it.
pub fn spent(budgets: &Budgets, generated_today: u64, now: DateTime<Utc>) -> Option<String> {
    let max = budgets.max_generated_tokens_per_day?;
    (generated_today >= max).then(|| spent_message(&budgets.zone(), max, generated_today, now))
}

/// The tokens the day budget still leaves when `generated_today` tokens were generated today:
/// `None` when there is no day budget. Work outside a turn's budgets (a tool result's summary,
/// a compaction) may generate no more than this, and none at 0.
pub fn left(budgets: &Budgets, generated_today: u64) -> Option<u64> {
    budgets
        .max_generated_tokens_per_day
        .map(|max| max.saturating_sub(generated_today))
}

/// The words of a spent day budget `max` after `generated` tokens today in `zone`.
pub fn spent_message(zone: &Zone, max: u64, generated: u64, now: DateTime<Utc>) -> String {
    format!(
        "{generated} tokens were generated today ({zone}) by all sessions; \
         {MAX_GENERATED_TOKENS_PER_DAY} is {max}; the day turns at {}",
        day_turns(zone, now).to_rfc3339()
    )
}

/// What a new task is refused with while the day's budget is spent.
pub fn refusal(budgets: &Budgets, generated_today: u64, now: DateTime<Utc>) -> Option<String> {
    spent(budgets, generated_today, now)
        .map(|why| format!("the day's budget is spent: {why}; new tasks are refused until then"))
}
