#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `docs/grafana-dashboard.json` stays true: it is JSON, its data source and the box it shows
//! are its `datasource` and `instance` variables, which every panel and query uses, no panel
//! mixes units, every metric and label it queries is in `docs/metrics.md`, and a real
//! Prometheus accepts every query it makes.

use e2e::prometheus::{self, Prometheus};
use e2e::workspace_root;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// The data source every panel and query names: the dashboard's `datasource` variable.
const DATASOURCE_UID: &str = "${datasource}";

/// The matcher every metric a query selects carries: the dashboard's `instance` variable.
const INSTANCE_MATCHER: &str = "instance=~\"$instance\"";

/// The prefixes of the metrics docs/metrics.md lists: a name with one of them is one of ours
/// (`process_` for every daemon's process).
const PREFIXES: [&str; 4] = ["loopd_", "brokerd_", "boxd_", "process_"];

/// The labels Prometheus gives every series it scrapes (the target's), besides the metric's.
const TARGET_LABELS: [&str; 2] = ["job", "instance"];

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

/// The dashboard's template variable `name`.
fn variable<'a>(dashboard: &'a Value, name: &str) -> &'a Value {
    dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no {name} variable in {}", dashboard["templating"]))
}

/// The selector (`{...}`, empty when none) after each of our metric names in `expr`.
fn selectors(expr: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find(|c: char| c.is_ascii_alphanumeric() || c == '_') {
        let word_end = rest[at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .map_or(rest.len(), |n| at + n);
        let word = &rest[at..word_end];
        rest = &rest[word_end..];
        if !PREFIXES.iter().any(|p| word.starts_with(p)) {
            continue;
        }
        let selector = match rest.strip_prefix('{') {
            Some(inner) => inner.split('}').next().unwrap_or_default().to_string(),
            None => String::new(),
        };
        found.push((word.to_string(), selector));
    }
    found
}

/// What a metric measures, by its name's suffix: the panels' units follow from it.
fn quantity(name: &str) -> &'static str {
    let base = HISTOGRAM_SUFFIXES
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name);
    let base = base.strip_suffix("_total").unwrap_or(base);
    if base.ends_with("_seconds") {
        "seconds"
    } else if base.ends_with("_bytes") {
        "bytes"
    } else if base.ends_with("_up") {
        "up or down"
    } else if base.ends_with("_info") {
        "build"
    } else {
        "count"
    }
}

#[test]
fn the_data_source_and_the_instance_are_variables_every_panel_and_query_uses() {
    let dashboard = dashboard();
    assert!(
        dashboard.get("__inputs").is_none(),
        "no inputs to fill at import"
    );
    let datasource = variable(&dashboard, "datasource");
    assert_eq!(datasource["type"], "datasource", "{datasource}");
    assert_eq!(datasource["query"], "prometheus", "{datasource}");
    let instance = variable(&dashboard, "instance");
    assert_eq!(instance["type"], "query", "{instance}");
    assert_eq!(instance["datasource"]["uid"], DATASOURCE_UID, "{instance}");
    assert!(
        instance["query"]["query"]
            .as_str()
            .unwrap()
            .contains(", instance)"),
        "{instance}"
    );
    assert_eq!(instance["includeAll"], true, "{instance}");
    for panel in data_panels(&dashboard) {
        assert_eq!(panel["datasource"]["uid"], DATASOURCE_UID, "{panel}");
        for target in panel["targets"].as_array().unwrap() {
            assert_eq!(target["datasource"]["uid"], DATASOURCE_UID, "{target}");
        }
    }
    for (title, expr) in queries(&dashboard) {
        let selected = selectors(&expr);
        assert!(
            !selected.is_empty(),
            "{title}: queries none of ours: {expr}"
        );
        for (name, selector) in selected {
            assert!(
                selector.split(',').any(|m| m.trim() == INSTANCE_MATCHER),
                "{title}: {name} is not scoped to $instance: {expr}"
            );
        }
    }
}

#[test]
fn no_panel_mixes_units() {
    for panel in data_panels(&dashboard()) {
        let title = panel["title"].as_str().unwrap_or_default();
        // Each query's first metric says what it measures (a ratio's numerator).
        let measured: BTreeSet<&str> = panel["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| quantity(&metric_names(t["expr"].as_str().unwrap())[0]))
            .collect();
        assert_eq!(measured.len(), 1, "{title} mixes {measured:?}");
        let unit = panel["fieldConfig"]["defaults"]["unit"].as_str();
        assert!(unit.is_some(), "{title} has no unit");
        match measured.first().copied() {
            Some("bytes") => assert_eq!(unit, Some("bytes"), "{title}"),
            Some("count") => assert_ne!(unit, Some("s"), "{title}"),
            _ => {}
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
        labels.extend(TARGET_LABELS.map(str::to_string));
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
        "loopd_generation_tokens_total",
        "loopd_generation_seconds_total",
        "loopd_tool_calls_total",
        "loopd_queued_tasks",
        "loopd_approvals_pending",
        "brokerd_calls_total",
        "boxd_child_up",
        "loopd_build_info",
        "process_resident_memory_bytes",
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
        let promql = expr
            .replace("$__rate_interval", "1m")
            .replace("$instance", ".*");
        if let Err(e) = prometheus.query(&promql) {
            panic!("{title}: Prometheus refuses {promql}: {e}");
        }
    }
}
