//! How long durable appends take: the store hands each session it opens the histogram that
//! loopd's metrics show (`loopd_log_append_duration_seconds`), so the log itself needs no
//! global and a store made without one (tests, tools) measures nothing.

use bxmetrics::prometheus_client::metrics::histogram::Histogram;
use std::time::Duration;

/// Where the durations of a store's appends go; nowhere by default.
#[derive(Debug, Clone, Default)]
pub struct AppendTimes(Option<Histogram>);

impl AppendTimes {
    /// Appends observed into `histogram`, in seconds.
    pub fn into_histogram(histogram: Histogram) -> AppendTimes {
        AppendTimes(Some(histogram))
    }

    /// One append (write and `fdatasync`) took `took`.
    pub fn observe(&self, took: Duration) {
        if let Some(histogram) = &self.0 {
            histogram.observe(took.as_secs_f64());
        }
    }
}
