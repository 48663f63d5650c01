//! How the usage accounts read for people: the `boxctl usage` table and today's line of
//! `boxctl status`.

use crate::format::duration_words;
use crate::safe_text::one_line;
use proto::api::{UsageReport, UsageToday, UsageTotals};

/// What the row of every session's sums is called (no session id has parentheses).
pub const ALL_ROW: &str = "(all)";

/// Model time in words: tenths of a second under a minute (`0.9s`, `42.0s`), then as
/// [`duration_words`] (`1m 2s`).
pub fn model_time_words(ms: u64) -> String {
    if ms < 60_000 {
        format!("{}.{}s", ms / 1000, ms % 1000 / 100)
    } else {
        duration_words(ms / 1000)
    }
}

/// The line above the table: what the report covers.
pub fn heading(report: &UsageReport) -> String {
    let zone = one_line(&report.timezone, None);
    let day = report.day.as_deref().map(|d| one_line(d, None));
    match (&report.session, day) {
        (None, Some(day)) => format!("usage on {day} ({zone}), every session"),
        (None, None) => "usage, every session".to_string(),
        (Some(session), Some(day)) => format!("usage of session {session} on {day} ({zone})"),
        (Some(session), None) => format!("usage of session {session}, every day"),
    }
}

fn row(name: String, t: &UsageTotals) -> [String; 8] {
    [
        name,
        t.turns.to_string(),
        t.model_calls.to_string(),
        t.evaluated_tokens.to_string(),
        t.cached_tokens.to_string(),
        t.generated_tokens.to_string(),
        model_time_words(t.model_ms),
        t.tool_calls.to_string(),
    ]
}

/// `boxctl usage`: the heading, then a table of each session's sums (largest generated
/// first, as loopd sends them) and their total, or of the one session asked for.
pub fn usage_table(report: &UsageReport) -> String {
    let mut rows: Vec<[String; 8]> = report
        .sessions
        .iter()
        .map(|s| row(s.session.to_string(), &s.totals))
        .collect();
    let last = match &report.session {
        Some(session) => session.to_string(),
        None => ALL_ROW.to_string(),
    };
    rows.push(row(last, &report.totals));
    let header = [
        "SESSION",
        "TURNS",
        "MODEL CALLS",
        "EVALUATED",
        "CACHED",
        "GENERATED",
        "MODEL TIME",
        "TOOL CALLS",
    ];
    format!(
        "{}\n{}",
        heading(report),
        crate::table::columns(header, &rows)
    )
}

/// Today's line of `boxctl status`: `usage   today 2026-12-01 (UTC): ...`, and the day's
/// budget when one is set.
pub fn today_line(today: &UsageToday) -> String {
    let t = &today.totals;
    let mut line = format!(
        "usage   today {} ({}): {} turns, {} model calls, {} tokens evaluated, {} cached, {} \
         generated, model {}, {} tool calls",
        one_line(&today.day, None),
        one_line(&today.timezone, None),
        t.turns,
        t.model_calls,
        t.evaluated_tokens,
        t.cached_tokens,
        t.generated_tokens,
        model_time_words(t.model_ms),
        t.tool_calls,
    );
    if let Some(budget) = today.max_generated_tokens_per_day {
        let spent = if t.generated_tokens >= budget {
            " (spent: new tasks are refused until the day turns)"
        } else {
            ""
        };
        line.push_str(&format!(
            "; day budget {} of {budget} generated tokens{spent}",
            t.generated_tokens
        ));
    }
    line.push('\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_time_reads_in_tenths_then_minutes() {
        assert_eq!(model_time_words(0), "0.0s");
        assert_eq!(model_time_words(950), "0.9s");
        assert_eq!(model_time_words(42_060), "42.0s");
        assert_eq!(model_time_words(61_500), "1m 1s");
        assert_eq!(model_time_words(7_200_000), "2h 0m");
    }
}
