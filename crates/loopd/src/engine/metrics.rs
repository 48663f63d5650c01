//! What the engine answers about spending: `GET /metrics` (the meter's metrics, with the
//! gauges of the engine's state sampled at the scrape) and `GET /v1/usage`; and the accounts'
//! last write at shutdown.

use super::{Engine, Inner};
use crate::api::{ApiFailure, UsageQuery};
use crate::meter::Sampled;
use proto::api::UsageReport;

impl Engine {
    /// The last write of the usage accounts, once the turns ended: what they spent since their
    /// last write (an interrupted turn's end, a write after a turn that failed) is not lost
    /// with a clean stop. Off the async threads (a write and its fsyncs).
    pub(super) async fn save_accounts(&self) {
        let meter = std::sync::Arc::clone(&self.inner.parts.meter);
        if tokio::task::spawn_blocking(move || meter.save_or_warn())
            .await
            .is_err()
        {
            tracing::warn!("the last write of the usage accounts failed");
        }
    }
}

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
