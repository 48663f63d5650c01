//! The stand-in's usage accounts: today (`2026-12-01`, UTC) sessions `s1` and `t-2` spent;
//! `2026-11-30` nobody did; `s1`'s whole life adds a day before.
#![allow(clippy::unwrap_used)]

use super::id;
use loopd::api::{ApiFailure, MetricsSource, UsageQuery};
use proto::api::{SessionUsage, UsageReport, UsageToday, UsageTotals};

/// The stand-in's today.
pub const TODAY: &str = "2026-12-01";

/// What `s1` spent today.
pub fn s1_today() -> UsageTotals {
    UsageTotals {
        turns: 3,
        model_calls: 7,
        evaluated_tokens: 12_345,
        cached_tokens: 40_000,
        generated_tokens: 2_100,
        model_ms: 61_500,
        tool_calls: 9,
    }
}

/// What `t-2` spent today.
pub fn t2_today() -> UsageTotals {
    UsageTotals {
        turns: 1,
        model_calls: 2,
        evaluated_tokens: 800,
        cached_tokens: 0,
        generated_tokens: 95,
        model_ms: 900,
        tool_calls: 0,
    }
}

fn sum(a: UsageTotals, b: UsageTotals) -> UsageTotals {
    UsageTotals {
        turns: a.turns + b.turns,
        model_calls: a.model_calls + b.model_calls,
        evaluated_tokens: a.evaluated_tokens + b.evaluated_tokens,
        cached_tokens: a.cached_tokens + b.cached_tokens,
        generated_tokens: a.generated_tokens + b.generated_tokens,
        model_ms: a.model_ms + b.model_ms,
        tool_calls: a.tool_calls + b.tool_calls,
    }
}

/// Today in `GET /v1/status`, with a day budget of 10 000 generated tokens.
pub fn usage_today() -> UsageToday {
    UsageToday {
        day: TODAY.into(),
        timezone: "UTC".into(),
        totals: sum(s1_today(), t2_today()),
        max_generated_tokens_per_day: Some(10_000),
    }
}

/// The answer to `query`: sessions `s1` and `t-2` exist, no other.
pub fn report(query: &UsageQuery) -> Result<UsageReport, ApiFailure> {
    let day = query.day.map(|d| d.to_string());
    let on_today = day.as_deref().is_none_or(|d| d == TODAY);
    let report = |totals, sessions| UsageReport {
        day: day.clone(),
        timezone: "UTC".into(),
        session: query.session.clone(),
        totals,
        sessions,
    };
    Ok(match query.session.as_ref().map(|s| s.as_str()) {
        Some("s1") if day.is_none() => report(sum(s1_today(), t2_today()), vec![]),
        Some("s1") if on_today => report(s1_today(), vec![]),
        Some("t-2") if on_today => report(t2_today(), vec![]),
        Some("s1" | "t-2") => report(UsageTotals::default(), vec![]),
        Some(other) => return Err(ApiFailure::NotFound(format!("no session {other}"))),
        None if on_today => UsageReport {
            day: Some(TODAY.into()),
            ..report(
                sum(s1_today(), t2_today()),
                vec![
                    SessionUsage {
                        session: id("s1"),
                        totals: s1_today(),
                    },
                    SessionUsage {
                        session: id("t-2"),
                        totals: t2_today(),
                    },
                ],
            )
        },
        None => report(UsageTotals::default(), vec![]),
    })
}

/// The stand-in's metrics: nothing boxctl reads.
pub struct StubMetrics;

impl MetricsSource for StubMetrics {
    fn open_metrics(&self) -> Result<String, std::fmt::Error> {
        Ok("# EOF\n".into())
    }
}
