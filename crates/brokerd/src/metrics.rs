//! brokerd's metrics (`docs/metrics.md`): its registry, what the broker counts as it decides
//! and runs calls, and the MCP servers' state, read from the servers at scrape time; and
//! `brokerd_build_info` and the `process_*` metrics ([`bxmetrics::process`]).
//!
//! No label takes unbounded values: a tool is named only when the config names it (a built-in
//! or a tool some grant names), so neither a model that invents names nor an MCP server that
//! lists new tools after each restart can grow the series; any other name is counted as
//! [`UNKNOWN_TOOL`]. Over brokerd's life at most [`MAX_TOOL_LABEL_VALUES`] names are labelled,
//! any later one is [`bxmetrics::labels::OTHER_LABEL`]. Decisions and reasons are fixed words;
//! servers come from `[[mcp]]` (whose names are `[a-z0-9_]`).

use crate::mcp::{McpServers, ServerState};
use bxcore::DenyReason;
use bxmetrics::labels::{BoundedLabels, MAX_TOOL_LABEL_VALUES};
use bxmetrics::prometheus_client::metrics::counter::Counter;
use bxmetrics::prometheus_client::metrics::family::Family;
use bxmetrics::prometheus_client::metrics::gauge::Gauge;
use bxmetrics::prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use bxmetrics::prometheus_client::registry::{Registry, Unit};
use proto::ToolResponse;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

/// The `tool` label of a call of a tool brokerd does not know.
pub const UNKNOWN_TOOL: &str = "unknown";

/// The `reason` label of a call that was not denied.
pub const NO_REASON: &str = "none";

/// The upper bound of the first bucket of `brokerd_call_duration_seconds`, in seconds.
pub const CALL_DURATION_FIRST_BUCKET_SECONDS: f64 = 0.001;

/// How many buckets `brokerd_call_duration_seconds` has, each twice the one before: from 1 ms
/// to 32.8 s, past the default `limits.call_timeout_ms` (30 s).
pub const CALL_DURATION_BUCKETS: u16 = 16;

/// The labels of `brokerd_calls_total`: tool, decision, reason.
type CallLabels = [(&'static str, String); 3];

/// One label: `tool` or `server`.
type NameLabel = [(&'static str, String); 1];

/// What came of a request, as `brokerd_calls_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, and its tool ran (whatever its result).
    Allowed,
    /// Refused by brokerd's policy, the tool's own check or the approval step.
    Denied(DenyReason),
    /// Asked about: the owner must approve it first; nothing ran.
    Asked,
    /// brokerd failed before the tool could run (its audit log, no approval id): nothing ran.
    Failed,
}

impl Decision {
    /// The decision of a request answered with `response` before any tool ran.
    pub fn before_running(response: &ToolResponse) -> Decision {
        match response {
            ToolResponse::Denied { reason, .. } => Decision::Denied(*reason),
            ToolResponse::Ask { .. } => Decision::Asked,
            ToolResponse::Failed { .. } | ToolResponse::Result { .. } => Decision::Failed,
        }
    }

    /// Its `decision` label.
    pub fn word(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::Denied(_) => "denied",
            Decision::Asked => "asked",
            Decision::Failed => "failed",
        }
    }

    /// Its `reason` label: the deny reason's word, [`NO_REASON`] unless denied.
    pub fn reason(self) -> &'static str {
        match self {
            Decision::Denied(reason) => reason_word(reason),
            _ => NO_REASON,
        }
    }
}

/// A deny reason's word, as the wire and the audit log spell it (snake case).
pub fn reason_word(reason: DenyReason) -> &'static str {
    match reason {
        DenyReason::NoGrant => "no_grant",
        DenyReason::InvalidArguments => "invalid_arguments",
        DenyReason::Egress => "egress",
        DenyReason::UntrustedContext => "untrusted_context",
        DenyReason::PathNotAllowed => "path_not_allowed",
        DenyReason::HostNotAllowed => "host_not_allowed",
        DenyReason::RateLimit => "rate_limit",
        DenyReason::UnknownTool => "unknown_tool",
        DenyReason::NotApproved => "not_approved",
        DenyReason::ApprovalRefused => "approval_refused",
        DenyReason::Leak => "leak",
    }
}

/// brokerd's registry and its metrics.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    call_duration: Family<NameLabel, Histogram, fn() -> Histogram>,
    mcp_up: Family<NameLabel, Gauge>,
    mcp_restarts: Family<NameLabel, Counter>,
    /// The tool names labelled so far.
    tools: BoundedLabels,
    /// The MCP servers to read at scrape time; weak, so that brokerd can still take them back
    /// to stop them at exit. The lock also keeps two scrapes from raising a counter twice.
    mcp: Mutex<Weak<McpServers>>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

/// A histogram with `brokerd_call_duration_seconds`' buckets.
fn call_histogram() -> Histogram {
    Histogram::new(exponential_buckets(
        CALL_DURATION_FIRST_BUCKET_SECONDS,
        2.0,
        CALL_DURATION_BUCKETS,
    ))
}

impl Metrics {
    /// A registry with brokerd's metrics, none counted yet, watching no MCP server; with
    /// brokerd's build and process.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        bxmetrics::process::register(&mut registry, "brokerd", env!("CARGO_PKG_VERSION"));
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "brokerd_calls",
            "Tool requests decided, by tool, decision (allowed, denied, asked, failed) and deny reason",
            calls.clone(),
        );
        let call_duration =
            Family::<NameLabel, Histogram, fn() -> Histogram>::new_with_constructor(call_histogram);
        registry.register_with_unit(
            "brokerd_call_duration",
            "Allowed calls, from the request to the result, by tool",
            Unit::Seconds,
            call_duration.clone(),
        );
        let mcp_up = Family::<NameLabel, Gauge>::default();
        registry.register(
            "brokerd_mcp_servers_up",
            "1 when the MCP server is running and answered its handshake",
            mcp_up.clone(),
        );
        let mcp_restarts = Family::<NameLabel, Counter>::default();
        registry.register(
            "brokerd_mcp_restarts",
            "Times brokerd started an MCP server again after it died",
            mcp_restarts.clone(),
        );
        Metrics {
            registry,
            calls,
            call_duration,
            mcp_up,
            mcp_restarts,
            tools: BoundedLabels::new(MAX_TOOL_LABEL_VALUES),
            mcp: Mutex::new(Weak::new()),
        }
    }

    /// The `tool` label of a call of `name`: the name when the config names the tool
    /// (`named`: a built-in, or named by a grant) and fewer than [`MAX_TOOL_LABEL_VALUES`]
    /// other names were labelled before, `other` past that, else [`UNKNOWN_TOOL`].
    pub fn tool_label<'a>(&self, name: &'a str, named: bool) -> &'a str {
        if named {
            self.tools.label(name)
        } else {
            UNKNOWN_TOOL
        }
    }

    /// Counts a request for the tool labelled `tool` ([`Metrics::tool_label`]) decided as `decision`;
    /// `ran` is how long an allowed call took from its request to its result.
    pub fn decided(&self, tool: &str, decision: Decision, ran: Option<Duration>) {
        let labels = [
            ("tool", tool.to_owned()),
            ("decision", decision.word().to_owned()),
            ("reason", decision.reason().to_owned()),
        ];
        self.calls.get_or_create(&labels).inc();
        if let Some(took) = ran {
            self.call_duration
                .get_or_create(&[("tool", tool.to_owned())])
                .observe(took.as_secs_f64());
        }
    }

    /// Reads `servers` at each scrape from now on, each of them a series from now on.
    pub fn watch_mcp(&self, servers: &Arc<McpServers>) {
        let mut watched = self.mcp.lock().unwrap_or_else(PoisonError::into_inner);
        *watched = Arc::downgrade(servers);
        drop(watched);
        self.refresh_mcp();
    }

    /// Sets the MCP series from the servers' state now.
    fn refresh_mcp(&self) {
        let watched = self.mcp.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(servers) = watched.upgrade() else {
            return;
        };
        for (name, status) in servers.statuses() {
            let label = [("server", name)];
            let up = i64::from(status.state == ServerState::Up);
            self.mcp_up.get_or_create(&label).set(up);
            let restarts = self.mcp_restarts.get_or_create(&label);
            restarts.inc_by(status.restarts.saturating_sub(restarts.get()));
        }
    }
}

impl bxmetrics::Source for Metrics {
    fn open_metrics(&self) -> Result<String, fmt::Error> {
        self.refresh_mcp();
        bxmetrics::exposition::open_metrics(&self.registry)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const REASONS: [DenyReason; 10] = [
        DenyReason::NoGrant,
        DenyReason::InvalidArguments,
        DenyReason::Egress,
        DenyReason::UntrustedContext,
        DenyReason::PathNotAllowed,
        DenyReason::HostNotAllowed,
        DenyReason::RateLimit,
        DenyReason::UnknownTool,
        DenyReason::NotApproved,
        DenyReason::ApprovalRefused,
    ];

    #[test]
    fn a_reason_is_labelled_with_its_word_on_the_wire() {
        for reason in REASONS {
            let wire = serde_json::to_value(reason).unwrap();
            assert_eq!(wire.as_str(), Some(reason_word(reason)), "{reason:?}");
        }
    }

    #[test]
    fn calls_are_counted_by_tool_decision_and_reason() {
        let metrics = Metrics::new();
        metrics.decided("echo", Decision::Allowed, Some(Duration::from_millis(3)));
        metrics.decided("echo", Decision::Denied(DenyReason::NoGrant), None);
        metrics.decided(UNKNOWN_TOOL, Decision::Asked, None);
        let text = bxmetrics::exposition::open_metrics(&metrics.registry).unwrap();
        for line in [
            "brokerd_calls_total{tool=\"echo\",decision=\"allowed\",reason=\"none\"} 1",
            "brokerd_calls_total{tool=\"echo\",decision=\"denied\",reason=\"no_grant\"} 1",
            "brokerd_calls_total{tool=\"unknown\",decision=\"asked\",reason=\"none\"} 1",
            "brokerd_call_duration_seconds_count{tool=\"echo\"} 1",
            "brokerd_call_duration_seconds_bucket{le=\"0.004\",tool=\"echo\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
    }
}
