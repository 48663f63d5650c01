//! loopd's Prometheus metrics: the registry and its families, exactly the names and labels of
//! docs/metrics.md. The label values are fixed words, tool names the turn's registry knows
//! (anything else is `unknown`) and schedule names from the config, so no label grows with
//! what a client or the model sends. Families of fixed words are resolved once, at start: a
//! turn's events then only add to counters.

pub use super::labels::{BUDGET_KEYS, END_WORDS, Refusal, Role, UNKNOWN_TOOL, end_word};
use bxcore::{ToolOutcome, TurnEnd};
use bxmetrics::labels::{BoundedLabels, MAX_TOOL_LABEL_VALUES, OTHER_LABEL};
use bxmetrics::prometheus_client::metrics::counter::Counter;
use bxmetrics::prometheus_client::metrics::family::Family;
use bxmetrics::prometheus_client::metrics::gauge::Gauge;
use bxmetrics::prometheus_client::metrics::histogram::Histogram;
use bxmetrics::prometheus_client::registry::Registry;
use std::borrow::Cow;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// Bucket bounds of a turn's duration, in seconds: a turn of a local model takes seconds to
/// minutes.
pub const TURN_SECONDS_BUCKETS: [f64; 12] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];
/// Bucket bounds of one model call, in seconds.
pub const MODEL_CALL_SECONDS_BUCKETS: [f64; 11] =
    [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];
/// Bucket bounds of one compaction or summary, in seconds.
pub const BACKGROUND_SECONDS_BUCKETS: [f64; 9] =
    [0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
/// Bucket bounds of one durable append to a session log (write and `fdatasync`), in seconds:
/// tens of microseconds on tmpfs, milliseconds on a busy disk.
pub const APPEND_SECONDS_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// What one model call counted.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CallCounts {
    /// Prompt tokens evaluated.
    pub evaluated: u64,
    /// Prompt tokens from the cache.
    pub cached: u64,
    /// Tokens generated.
    pub generated: u64,
    /// Tokens llama-server timed generating (`timings.predicted_n`; 0 without timings).
    pub timed_generated: u64,
    /// The time llama-server spent generating them, in seconds (`timings.predicted_ms`).
    pub generation_seconds: f64,
    /// The call's wall time, in microseconds.
    pub model_us: u64,
}

type Labels1 = [(&'static str, &'static str); 1];
type Labels2 = [(&'static str, Cow<'static, str>); 2];
type HistogramFamily = Family<Labels1, Histogram, fn() -> Histogram>;

/// The metrics of one role, resolved at start.
struct RoleSeries {
    calls: Counter,
    evaluated: Counter,
    cached: Counter,
    generated: Counter,
    timed_generated: Counter,
    generation_seconds: Counter<f64, AtomicU64>,
    duration: Histogram,
}

/// The counters of one kind of background work, resolved at start.
struct WorkSeries {
    ok: Counter,
    mechanical: Option<Counter>,
    failed: Counter,
    duration: Histogram,
}

/// loopd's registry and its series.
pub struct Metrics {
    registry: Registry,
    turns: Family<Labels1, Counter>,
    turn_duration: Histogram,
    roles: [RoleSeries; 3],
    tools: Family<Labels2, Counter>,
    /// The tool names counted so far: at most `MAX_TOOL_LABEL_VALUES` over loopd's life (an
    /// MCP server may list new names after each restart), later ones count as `other`.
    tool_names: BoundedLabels,
    queued: Gauge,
    running: Gauge,
    waiting: Gauge,
    approvals: Gauge,
    compactions: WorkSeries,
    summaries: WorkSeries,
    append: Histogram,
    schedule_runs: Family<Labels2, Counter>,
    budget_stops: Family<Labels1, Counter>,
    refused: [Counter; 3],
}

/// What the engine's state says at a scrape: the gauges sampled then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sampled {
    /// Tasks queued behind a running turn.
    pub queued: u64,
    /// Sessions with a running turn.
    pub running: u64,
    /// Tasks accepted and not yet started.
    pub waiting: u64,
    /// Calls waiting for the owner.
    pub approvals: u64,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    /// Every series of docs/metrics.md, registered, at zero; with loopd's build and process.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        bxmetrics::process::register(&mut registry, "loopd", env!("CARGO_PKG_VERSION"));
        let turns = Family::<Labels1, Counter>::default();
        registry.register("loopd_turns", "Turns ended, by outcome", turns.clone());
        // Every outcome from zero, so that a rate over the first turn of a kind is right.
        for outcome in END_WORDS {
            let _ = turns.get_or_create(&[("outcome", outcome)]);
        }
        let turn_duration = Histogram::new(TURN_SECONDS_BUCKETS);
        registry.register(
            "loopd_turn_duration_seconds",
            "From a turn's start to its end",
            turn_duration.clone(),
        );
        let calls = Family::<Labels1, Counter>::default();
        registry.register(
            "loopd_model_calls",
            "Model calls made, by slot role",
            calls.clone(),
        );
        let evaluated = Family::<Labels1, Counter>::default();
        registry.register(
            "loopd_prompt_evaluated_tokens",
            "Prompt tokens llama-server evaluated (timings.prompt_n)",
            evaluated.clone(),
        );
        let cached = Family::<Labels1, Counter>::default();
        registry.register(
            "loopd_prompt_cached_tokens",
            "Prompt tokens served from the slot's cache (timings.cache_n)",
            cached.clone(),
        );
        let generated = Family::<Labels1, Counter>::default();
        registry.register(
            "loopd_generated_tokens",
            "Tokens generated (timings.predicted_n)",
            generated.clone(),
        );
        // The generation speed is the rate of the one over the rate of the other (PromQL in
        // docs/metrics.md): counters, so that a scrape interval averages over every call.
        let timed_generated = Family::<Labels1, Counter>::default();
        registry.register(
            "loopd_generation_tokens",
            "Tokens llama-server timed generating, by slot role (timings.predicted_n)",
            timed_generated.clone(),
        );
        let generation_seconds = Family::<Labels1, Counter<f64, AtomicU64>>::default();
        registry.register(
            "loopd_generation_seconds",
            "Time llama-server spent generating them, by slot role (timings.predicted_ms)",
            generation_seconds.clone(),
        );
        let durations: HistogramFamily =
            Family::new_with_constructor(|| Histogram::new(MODEL_CALL_SECONDS_BUCKETS));
        registry.register(
            "loopd_model_call_duration_seconds",
            "One model call, as loopd measured it",
            durations.clone(),
        );
        let roles = Role::ALL.map(|role| {
            let labels = [("role", role.word())];
            RoleSeries {
                calls: calls.get_or_create_owned(&labels),
                evaluated: evaluated.get_or_create_owned(&labels),
                cached: cached.get_or_create_owned(&labels),
                generated: generated.get_or_create_owned(&labels),
                timed_generated: timed_generated.get_or_create_owned(&labels),
                generation_seconds: generation_seconds.get_or_create_owned(&labels),
                duration: durations.get_or_create_owned(&labels),
            }
        });
        let tools = Family::<Labels2, Counter>::default();
        registry.register(
            "loopd_tool_calls",
            "Tool calls of turns, by tool and outcome",
            tools.clone(),
        );
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let gauge = Gauge::default();
            registry.register(name, help, gauge.clone());
            gauge
        };
        let queued = gauge(
            &mut registry,
            "loopd_queued_tasks",
            "Tasks queued behind a running turn, all sessions",
        );
        let running = gauge(
            &mut registry,
            "loopd_running_turns",
            "Sessions with a running turn",
        );
        let waiting = gauge(
            &mut registry,
            "loopd_waiting_tasks",
            "Tasks accepted and not yet started",
        );
        let compactions = work_series(
            &mut registry,
            "loopd_compactions",
            "Compactions, by outcome",
            "loopd_compaction_duration_seconds",
            "One compaction",
            true,
        );
        let summaries = work_series(
            &mut registry,
            "loopd_summaries",
            "Tool-result summaries, by outcome",
            // Not `loopd_summary_duration_seconds`: promtool's lint refuses a name holding a
            // metric type's name (`summary`).
            "loopd_summarise_duration_seconds",
            "One tool-result summary",
            false,
        );
        let append = Histogram::new(APPEND_SECONDS_BUCKETS);
        registry.register(
            "loopd_log_append_duration_seconds",
            "One durable append to a session log (write + fsync)",
            append.clone(),
        );
        let approvals = gauge(
            &mut registry,
            "loopd_approvals_pending",
            "Calls waiting for the owner",
        );
        let schedule_runs = Family::<Labels2, Counter>::default();
        registry.register(
            "loopd_schedule_runs",
            "Schedule runs, by schedule and outcome",
            schedule_runs.clone(),
        );
        let budget_stops = Family::<Labels1, Counter>::default();
        registry.register(
            "loopd_budget_stops",
            "Turns ended by a budget",
            budget_stops.clone(),
        );
        for budget in BUDGET_KEYS {
            let _ = budget_stops.get_or_create(&[("budget", budget)]);
        }
        let refusals = Family::<Labels1, Counter>::default();
        registry.register(
            "loopd_tasks_refused",
            "Tasks refused at submission, by reason",
            refusals.clone(),
        );
        let refused = Refusal::ALL.map(|r| refusals.get_or_create_owned(&[("reason", r.word())]));
        Metrics {
            registry,
            turns,
            turn_duration,
            roles,
            tools,
            queued,
            running,
            waiting,
            approvals,
            compactions,
            summaries,
            append,
            schedule_runs,
            budget_stops,
            refused,
            tool_names: BoundedLabels::new(MAX_TOOL_LABEL_VALUES),
        }
    }

    /// The registry, to encode.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The histogram of session log appends, for the store.
    pub fn append_histogram(&self) -> Histogram {
        self.append.clone()
    }

    /// A model call of `role` answered.
    pub fn model_call(&self, role: Role, counts: &CallCounts) {
        let series = &self.roles[role.index()];
        series.calls.inc();
        series.evaluated.inc_by(counts.evaluated);
        series.cached.inc_by(counts.cached);
        series.generated.inc_by(counts.generated);
        series.timed_generated.inc_by(counts.timed_generated);
        // A time that is not a time (llama-server's NaN, or below zero) adds nothing.
        if counts.generation_seconds.is_finite() && counts.generation_seconds > 0.0 {
            series.generation_seconds.inc_by(counts.generation_seconds);
        }
        series
            .duration
            .observe(Duration::from_micros(counts.model_us).as_secs_f64());
    }

    /// A turn ended `end` after `took`.
    pub fn turn(&self, end: &TurnEnd, took: Duration) {
        self.turns
            .get_or_create(&[("outcome", end_word(end))])
            .inc();
        self.turn_duration.observe(took.as_secs_f64());
        if let TurnEnd::Budget { budget, .. } = end {
            let key = BUDGET_KEYS
                .iter()
                .find(|k| **k == budget.as_str())
                .copied()
                .unwrap_or(UNKNOWN_TOOL);
            self.budget_stops.get_or_create(&[("budget", key)]).inc();
        }
    }

    /// A tool call ended `outcome`; `tool` is a name the turn's registry knows, or
    /// [`UNKNOWN_TOOL`]. Past `MAX_TOOL_LABEL_VALUES` names, a new one counts as `other`.
    pub fn tool_call(&self, tool: Cow<'static, str>, outcome: &ToolOutcome) {
        let tool = if tool == UNKNOWN_TOOL || self.tool_names.label(&tool) == tool.as_ref() {
            tool
        } else {
            Cow::Borrowed(OTHER_LABEL)
        };
        let outcome = match outcome {
            ToolOutcome::Ok => "ok",
            ToolOutcome::Failed => "failed",
            ToolOutcome::Denied { .. } => "denied",
            ToolOutcome::Redirected => "redirected",
        };
        self.tools
            .get_or_create(&[("tool", tool), ("outcome", Cow::Borrowed(outcome))])
            .inc();
    }

    /// A compaction (`compaction`) or a summary ended `outcome` after `took`.
    pub fn background(
        &self,
        compaction: bool,
        outcome: crate::runtime::BackgroundOutcome,
        took: Duration,
    ) {
        use crate::runtime::BackgroundOutcome as Outcome;
        let series = if compaction {
            &self.compactions
        } else {
            &self.summaries
        };
        match (outcome, &series.mechanical) {
            (Outcome::Ok, _) => series.ok.inc(),
            (Outcome::Mechanical, Some(mechanical)) => mechanical.inc(),
            (Outcome::Mechanical, None) | (Outcome::Failed, _) => series.failed.inc(),
        };
        series.duration.observe(took.as_secs_f64());
    }

    /// A run of schedule `name` (a name from the config) ended `outcome`.
    pub fn schedule_run(&self, name: &str, outcome: &'static str) {
        self.schedule_runs
            .get_or_create(&[
                ("schedule", Cow::Owned(name.to_string())),
                ("outcome", Cow::Borrowed(outcome)),
            ])
            .inc();
    }

    /// A task was refused at submission.
    pub fn refused(&self, why: Refusal) {
        self.refused[why as usize].inc();
    }

    /// Sets the gauges sampled at a scrape.
    pub fn sample(&self, sampled: Sampled) {
        let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.queued.set(gauge(sampled.queued));
        self.running.set(gauge(sampled.running));
        self.waiting.set(gauge(sampled.waiting));
        self.approvals.set(gauge(sampled.approvals));
    }
}

/// The counters and the histogram of one kind of background work.
fn work_series(
    registry: &mut Registry,
    name: &str,
    help: &str,
    duration_name: &str,
    duration_help: &str,
    mechanical: bool,
) -> WorkSeries {
    let family = Family::<Labels1, Counter>::default();
    registry.register(name, help, family.clone());
    let duration = Histogram::new(BACKGROUND_SECONDS_BUCKETS);
    registry.register(duration_name, duration_help, duration.clone());
    WorkSeries {
        ok: family.get_or_create_owned(&[("outcome", "ok")]),
        mechanical: mechanical.then(|| family.get_or_create_owned(&[("outcome", "mechanical")])),
        failed: family.get_or_create_owned(&[("outcome", "failed")]),
        duration,
    }
}

#[cfg(test)]
mod tests;
