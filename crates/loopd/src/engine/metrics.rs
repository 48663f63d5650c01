//! What the engine answers about spending: `GET /metrics` (the meter's metrics, with the
//! gauges of the engine's state sampled at the scrape) and `GET /v1/usage`.

use super::{Engine, Inner};
use crate::api::{ApiFailure, UsageQuery};
use crate::meter::Sampled;
use proto::api::UsageReport;

impl bxmetrics::Source for Engine {
    fn open_metrics(&self) -> Result<String, std::fmt::Error> {
        let sampled = sample(&self.inner);
        self.inner.parts.meter.open_metrics(sampled)
    }
}

/// The engine's state now, as the gauges show it.
fn sample(inner: &Inner) -> Sampled {
    let (running, queued) = {
        let lanes = inner.lock_lanes();
        (
            lanes.values().filter(|l| l.is_running()).count() as u64,
            lanes.values().map(|l| l.queued() as u64).sum(),
        )
    };
    Sampled {
        queued,
        running,
        waiting: inner.waiters.count() as u64,
        approvals: inner.approvals.len() as u64,
    }
}

/// The usage report `query` asks for. A session neither the store nor the accounts know is
/// [`ApiFailure::NotFound`]; one that exists but spent nothing (that day) reads as zeros.
pub(super) fn usage(inner: &Inner, query: &UsageQuery) -> Result<UsageReport, ApiFailure> {
    let meter = &inner.parts.meter;
    if let Some(id) = &query.session
        && !meter.knows(id)
    {
        inner.known(id)?;
    }
    Ok(meter.report(query.session.as_ref(), query.day))
}
