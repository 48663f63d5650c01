#![allow(clippy::unwrap_used)]

use super::*;
use crate::meter::promtool;
use bxcore::DenyReason;
use std::collections::BTreeSet;

/// The loopd metric names docs/metrics.md lists (first column of its loopd table).
fn documented() -> BTreeSet<String> {
    let doc = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/metrics.md"
    ));
    let table = doc
        .split("## loopd")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap();
    table
        .lines()
        .filter_map(|line| line.strip_prefix("| `loopd_"))
        .filter_map(|rest| rest.split('`').next())
        .map(|name| format!("loopd_{name}"))
        .collect()
}

/// The metric names a classic exposition declares (`# TYPE NAME ...`).
fn declared(classic: &str) -> BTreeSet<String> {
    classic
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE "))
        .filter_map(|rest| rest.split(' ').next())
        .map(str::to_string)
        .collect()
}

fn classic(metrics: &Metrics) -> String {
    bxmetrics::exposition::classic(
        &bxmetrics::exposition::open_metrics(metrics.registry()).unwrap(),
    )
}

#[test]
fn the_registry_declares_exactly_the_names_docs_metrics_lists() {
    let documented = documented();
    assert!(documented.len() >= 22, "{documented:?}");
    let metrics = Metrics::new();
    // A family without a series is not written: these get theirs from what happens.
    metrics.tool_call(Cow::Borrowed("clock"), &ToolOutcome::Ok);
    metrics.schedule_run("daily", "done");
    let (ours, shared): (BTreeSet<String>, BTreeSet<String>) = declared(&classic(&metrics))
        .into_iter()
        .partition(|name| name.starts_with("loopd_"));
    assert_eq!(ours, documented);
    // Every daemon's, from bxmetrics (docs/metrics.md, "Every daemon").
    let process = bxmetrics::process::PROCESS_METRICS.map(str::to_string);
    assert_eq!(shared, BTreeSet::from(process));
}

#[test]
fn the_ratios_are_left_to_promql_counters_and_build_info_is_one() {
    let metrics = Metrics::new();
    metrics.model_call(Role::Main, &CallCounts::default());
    metrics.sample(Sampled::default());
    let text = classic(&metrics);
    // Derived gauges gone: PromQL divides the counters' rates (docs/metrics.md).
    for gone in [
        "loopd_prompt_cached_ratio",
        "loopd_generation_tokens_per_second",
    ] {
        assert!(!text.contains(gone), "{gone} in\n{text}");
    }
    let info = format!(
        "loopd_build_info{{version=\"{}\",",
        env!("CARGO_PKG_VERSION")
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with(&info) && l.ends_with(" 1")),
        "{text}"
    );
    for name in bxmetrics::process::PROCESS_METRICS {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{name} "))),
            "no {name} in\n{text}"
        );
    }
}

#[test]
fn a_generation_time_that_is_not_a_time_adds_nothing() {
    let metrics = Metrics::new();
    for seconds in [f64::NAN, -1.0, f64::INFINITY] {
        let counts = CallCounts {
            generation_seconds: seconds,
            ..CallCounts::default()
        };
        metrics.model_call(Role::Main, &counts);
    }
    let text = classic(&metrics);
    let line = "loopd_generation_seconds_total{role=\"main\"} 0.0";
    assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
}

#[test]
fn every_turn_outcome_and_budget_starts_at_zero() {
    let text = classic(&Metrics::new());
    for outcome in END_WORDS {
        let line = format!("loopd_turns_total{{outcome=\"{outcome}\"}} 0");
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    for budget in BUDGET_KEYS {
        let line = format!("loopd_budget_stops_total{{budget=\"{budget}\"}} 0");
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    promtool::check(&text);
}

#[test]
fn every_kind_of_sample_passes_promtool() {
    let metrics = Metrics::new();
    let counts = CallCounts {
        evaluated: 10,
        cached: 30,
        generated: 5,
        timed_generated: 4,
        generation_seconds: 0.5,
        model_us: 120_000,
    };
    metrics.model_call(Role::Main, &counts);
    metrics.model_call(Role::Subagent, &CallCounts::default());
    metrics.turn(&TurnEnd::Done, Duration::from_millis(1500));
    metrics.turn(
        &TurnEnd::Budget {
            budget: "max_turn_ms".into(),
            message: "the turn ran 2 s; max_turn_ms is 1000".into(),
        },
        Duration::from_secs(2),
    );
    metrics.tool_call(Cow::Borrowed("clock"), &ToolOutcome::Ok);
    metrics.tool_call(
        Cow::Borrowed(UNKNOWN_TOOL),
        &ToolOutcome::Denied {
            reason: DenyReason::NoGrant,
        },
    );
    metrics.background(
        true,
        crate::runtime::BackgroundOutcome::Mechanical,
        Duration::from_secs(3),
    );
    metrics.background(
        false,
        crate::runtime::BackgroundOutcome::Ok,
        Duration::from_secs(1),
    );
    metrics.schedule_run("daily", "done");
    metrics.refused(Refusal::Busy);
    metrics.append_histogram().observe(0.0002);
    metrics.sample(Sampled {
        queued: 2,
        running: 1,
        waiting: 3,
        approvals: 1,
    });
    let text = classic(&metrics);
    for line in [
        "loopd_model_calls_total{role=\"main\"} 1",
        "loopd_prompt_evaluated_tokens_total{role=\"main\"} 10",
        "loopd_prompt_cached_tokens_total{role=\"main\"} 30",
        "loopd_generated_tokens_total{role=\"main\"} 5",
        "loopd_generation_tokens_total{role=\"main\"} 4",
        "loopd_generation_seconds_total{role=\"main\"} 0.5",
        "loopd_generation_tokens_total{role=\"subagent\"} 0",
        "loopd_generation_seconds_total{role=\"subagent\"} 0.0",
        "loopd_turns_total{outcome=\"done\"} 1",
        "loopd_turns_total{outcome=\"budget\"} 1",
        "loopd_budget_stops_total{budget=\"max_turn_ms\"} 1",
        "loopd_tool_calls_total{tool=\"clock\",outcome=\"ok\"} 1",
        "loopd_tool_calls_total{tool=\"unknown\",outcome=\"denied\"} 1",
        "loopd_compactions_total{outcome=\"mechanical\"} 1",
        "loopd_summaries_total{outcome=\"ok\"} 1",
        "loopd_schedule_runs_total{schedule=\"daily\",outcome=\"done\"} 1",
        "loopd_tasks_refused_total{reason=\"busy\"} 1",
        "loopd_tasks_refused_total{reason=\"day_budget\"} 0",
        "loopd_log_append_duration_seconds_count 1",
        "loopd_turn_duration_seconds_count 2",
        "loopd_queued_tasks 2",
        "loopd_running_turns 1",
        "loopd_waiting_tasks 3",
        "loopd_approvals_pending 1",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    promtool::check(&text);
}

#[test]
fn a_budget_the_metrics_do_not_know_is_counted_as_unknown() {
    let metrics = Metrics::new();
    let end = TurnEnd::Budget {
        budget: "made up by a\nclient".into(),
        message: String::new(),
    };
    metrics.turn(&end, Duration::ZERO);
    let text = classic(&metrics);
    assert!(
        text.contains("loopd_budget_stops_total{budget=\"unknown\"} 1"),
        "{text}"
    );
}

#[test]
fn tool_labels_stay_bounded_over_loopds_life() {
    let metrics = Metrics::new();
    // An MCP server that lists new names after every restart, each one called once.
    for n in 0..(MAX_TOOL_LABEL_VALUES + 50) {
        metrics.tool_call(Cow::Owned(format!("renamed_{n}")), &ToolOutcome::Ok);
    }
    metrics.tool_call(Cow::Borrowed(UNKNOWN_TOOL), &ToolOutcome::Ok);
    let text = classic(&metrics);
    let series: BTreeSet<&str> = text
        .lines()
        .filter(|l| l.starts_with("loopd_tool_calls_total{"))
        .filter_map(|l| l.split("tool=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(series.len(), MAX_TOOL_LABEL_VALUES + 2, "{series:?}");
    assert!(series.contains(OTHER_LABEL) && series.contains(UNKNOWN_TOOL));
    // A name seen before the cap keeps its own series.
    metrics.tool_call(Cow::Borrowed("renamed_0"), &ToolOutcome::Ok);
    assert!(classic(&metrics).contains("tool=\"renamed_0\""));
}
