#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `docs/grafana-dashboard.json` stays true: it is JSON, its data source is the
//! `DS_PROMETHEUS` input, every metric and label it queries is in `docs/metrics.md`, and a real
//! Prometheus accepts every query it makes.

use e2e::prometheus::{self, Prometheus};
use e2e::workspace_root;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The data source every panel and query names: Grafana fills it in at import.
const DATASOURCE_UID: &str = "${DS_PROMETHEUS}";

/// The prefixes of boxmaker's metrics: a name with one of them is one of ours.
const PREFIXES: [&str; 3] = ["loopd_", "brokerd_", "boxd_"];

/// The series a histogram adds to its name.
const HISTOGRAM_SUFFIXES: [&str; 3] = ["_bucket", "_sum", "_count"];

/// A metric of `docs/metrics.md`: its type and its labels.
#[derive(Debug)]
struct Documented {
    kind: String,
    labels: BTreeSet<String>,
}

/// The backticked words of a table cell.
fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// `text` without what is in parentheses.
fn outside_parentheses(text: &str) -> String {
    let mut depth = 0usize;
    text.chars()
        .filter(|&c| {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ => return depth == 0,
            }
            false
        })
        .collect()
}

/// Every metric of `docs/metrics.md`'s tables, by name. A label cell names each label, its
/// values in parentheses after it: the labels are the backticked words outside them.
fn documented() -> BTreeMap<String, Documented> {
    let text = std::fs::read_to_string(workspace_root().join("docs/metrics.md")).unwrap();
    let mut metrics = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = backticked(cells[1]).remove(0);
        let labels = backticked(&outside_parentheses(cells[3]))
            .into_iter()
            .collect();
        metrics.insert(
            name,
            Documented {
                kind: cells[2].to_string(),
                labels,
            },
        );
    }
    metrics
}

fn dashboard() -> Value {
    let text =
        std::fs::read_to_string(workspace_root().join("docs/grafana-dashboard.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("docs/grafana-dashboard.json: {e}"))
}

/// The panels that show data (rows only group them).
fn data_panels(dashboard: &Value) -> Vec<&Value> {
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] != "row")
        .collect()
}

/// Every query of the dashboard: (panel title, PromQL).
fn queries(dashboard: &Value) -> Vec<(String, String)> {
    data_panels(dashboard)
        .into_iter()
        .flat_map(|p| {
            let title = p["title"].as_str().unwrap_or_default().to_string();
            p["targets"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |t| (title.clone(), t["expr"].as_str().unwrap().to_string()))
        })
        .collect()
}

/// The names in `expr` that are boxmaker's metrics (by prefix).
fn metric_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|word| PREFIXES.iter().any(|p| word.starts_with(p)))
        .map(str::to_string)
        .collect()
}

/// The labels of every `by (...)` in `expr`.
fn grouping_labels(expr: &str) -> Vec<String> {
    expr.split("by (")
        .skip(1)
        .flat_map(|rest| {
            rest.split(')')
                .next()
                .unwrap_or("")
                .split(',')
                .map(|l| l.trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The documented metric a queried name is: itself, or the histogram it is a series of.
fn resolve<'a>(
    name: &str,
    metrics: &'a BTreeMap<String, Documented>,
) -> Option<(String, &'a Documented)> {
    if let Some(found) = metrics.get(name) {
        return Some((name.to_string(), found));
    }
    HISTOGRAM_SUFFIXES.iter().find_map(|suffix| {
        let base = name.strip_suffix(suffix)?;
        let found = metrics.get(base).filter(|m| m.kind == "histogram")?;
        Some((base.to_string(), found))
    })
}

#[test]
fn the_dashboard_takes_its_prometheus_as_an_input() {
    let dashboard = dashboard();
    let inputs = dashboard["__inputs"].as_array().unwrap();
    assert!(
        inputs
            .iter()
            .any(|i| i["name"] == "DS_PROMETHEUS" && i["pluginId"] == "prometheus"),
        "{inputs:?}"
    );
    for panel in data_panels(&dashboard) {
        assert_eq!(panel["datasource"]["uid"], DATASOURCE_UID, "{panel}");
        for target in panel["targets"].as_array().unwrap() {
            assert_eq!(target["datasource"]["uid"], DATASOURCE_UID, "{target}");
        }
    }
}

#[test]
fn every_metric_and_label_the_dashboard_queries_is_in_docs_metrics_md() {
    let metrics = documented();
    assert!(metrics.len() > 20, "docs/metrics.md's tables: {metrics:?}");
    let mut queried = BTreeSet::new();
    for (title, expr) in queries(&dashboard()) {
        let names = metric_names(&expr);
        assert!(!names.is_empty(), "{title}: queries none of ours: {expr}");
        let mut labels = BTreeSet::new();
        for name in names {
            let (base, found) = resolve(&name, &metrics).unwrap_or_else(|| {
                panic!("{title}: {name} is not in docs/metrics.md (query: {expr})")
            });
            if found.kind == "histogram" {
                labels.insert("le".to_string());
            }
            labels.extend(found.labels.iter().cloned());
            queried.insert(base);
        }
        for label in grouping_labels(&expr) {
            assert!(
                labels.contains(&label),
                "{title}: label {label} is not one of its metrics' in docs/metrics.md: {expr}"
            );
        }
    }
    // What an owner looks at first (issue 18's list).
    for needed in [
        "loopd_turns_total",
        "loopd_turn_duration_seconds",
        "loopd_prompt_evaluated_tokens_total",
        "loopd_prompt_cached_tokens_total",
        "loopd_generated_tokens_total",
        "loopd_prompt_cached_ratio",
        "loopd_generation_tokens_per_second",
        "loopd_tool_calls_total",
        "loopd_queued_tasks",
        "loopd_approvals_pending",
        "brokerd_calls_total",
        "boxd_child_up",
    ] {
        assert!(queried.contains(needed), "no panel shows {needed}");
    }
}

#[test]
fn a_real_prometheus_accepts_every_query_of_the_dashboard() {
    let Some(binary) = prometheus::binary_or_skip() else {
        return;
    };
    let _machine = e2e::real::heavy();
    let prometheus = Prometheus::start(&binary, &[]).unwrap();
    for (title, expr) in queries(&dashboard()) {
        // Grafana's own variable, which it replaces before it asks Prometheus.
        let promql = expr.replace("$__rate_interval", "1m");
        if let Err(e) = prometheus.query(&promql) {
            panic!("{title}: Prometheus refuses {promql}: {e}");
        }
    }
}
