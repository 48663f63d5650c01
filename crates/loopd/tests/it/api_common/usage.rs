//! The stand-in's usage report (what the query asked for, 2 turns and 40 tokens) and metrics.

use loopd::api::{MetricsSource, UsageQuery};
use proto::api::{UsageReport, UsageTotals};

/// The report of `query` for a session the stand-in knows (or every session).
pub fn report(query: &UsageQuery) -> UsageReport {
    UsageReport {
        day: query.day.map(|d| d.to_string()),
        timezone: "UTC".into(),
        session: query.session.clone(),
        totals: UsageTotals {
            turns: 2,
            generated_tokens: 40,
            ..Default::default()
        },
        sessions: Vec::new(),
    }
}

/// The stand-in's metrics: one counter, `loopd_turns_total`, at 2.
pub struct StubMetrics;

impl MetricsSource for StubMetrics {
    fn open_metrics(&self) -> Result<String, std::fmt::Error> {
        Ok(
            "# HELP loopd_turns Turns ended.\n# TYPE loopd_turns counter\n\
            loopd_turns_total 2\n# EOF\n"
                .into(),
        )
    }
}
