//! The `tool` label stays bounded whatever the tool set holds: a tool no grant names (one a
//! hostile MCP server listed) is `unknown`, and past `MAX_TOOL_LABEL_VALUES` distinct names
//! over brokerd's life every new one is `other`.

use super::{calls, sample, series_of};
use crate::common::{Fixed, broker, config, grant, request, tools};
use brokerd::broker::Broker;
use brokerd::config::Limits;
use bxmetrics::labels::{MAX_TOOL_LABEL_VALUES, OTHER_LABEL};
use proto::ToolResponse;
use std::collections::HashSet;
use std::sync::Arc;

/// How many granted tools past the limit the test calls.
const PAST_THE_LIMIT: usize = 44;

fn scrape(b: &Broker) -> String {
    bxmetrics::scrape(b.metrics().as_ref(), None).unwrap().body
}

#[tokio::test]
async fn metrics_a_tool_no_grant_names_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), vec![grant("echo", &["*"])], Limits::default());
    // In the tool set, as an MCP server's listing would put it, but named by no grant.
    let b = broker(&cfg, tools(vec![Fixed::text("listed_only", "x")]));
    let r = b.call(&request("main", 1, "listed_only", "{}")).await;
    assert!(matches!(r, ToolResponse::Denied { .. }), "{r:?}");
    let text = scrape(&b);
    assert!(!text.contains("listed_only"), "{text}");
    assert_eq!(
        sample(&text, &calls("unknown", "denied", "no_grant")),
        Some(1.0),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_tool_labels_stay_bounded_over_brokerds_life() {
    let dir = tempfile::tempdir().unwrap();
    let names: Vec<String> = (0..MAX_TOOL_LABEL_VALUES + PAST_THE_LIMIT)
        .map(|i| format!("granted_{i}"))
        .collect();
    let grants = names.iter().map(|n| grant(n, &["*"])).collect();
    let extra = names
        .iter()
        .map(|n| Fixed::text(n, "ok") as Arc<dyn brokerd::tool::Tool>)
        .collect();
    let cfg = config(dir.path(), grants, Limits::default());
    let b = broker(&cfg, tools(extra));
    for name in &names {
        let r = b.call(&request("main", 1, name, "{}")).await;
        assert!(matches!(r, ToolResponse::Result { .. }), "{name}: {r:?}");
    }
    let text = scrape(&b);
    let values: HashSet<&str> = series_of(&text, "brokerd_calls_total")
        .into_iter()
        .filter_map(|line| line.split("tool=\"").nth(1)?.split('"').next())
        .collect();
    assert_eq!(values.len(), MAX_TOOL_LABEL_VALUES + 1, "{text}");
    assert!(values.contains(OTHER_LABEL), "{text}");
    assert_eq!(
        sample(&text, &calls(OTHER_LABEL, "allowed", "none")),
        Some(PAST_THE_LIMIT as f64),
        "{text}"
    );
    // A name labelled before the limit keeps its label.
    let r = b.call(&request("main", 2, &names[0], "{}")).await;
    assert!(matches!(r, ToolResponse::Result { .. }), "{r:?}");
    let text = scrape(&b);
    assert_eq!(
        sample(&text, &calls(&names[0], "allowed", "none")),
        Some(2.0),
        "{text}"
    );
}
