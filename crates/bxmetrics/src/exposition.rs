//! The text a scrape gets, in the format the scraper asked for.
//!
//! `prometheus-client` writes OpenMetrics, where a counter's `HELP`/`TYPE` lines name the
//! family (`loopd_turns`) and its samples carry `_total` (`loopd_turns_total`). The classic
//! text format 0.0.4, which `promtool check metrics` and older scrapers read, wants the
//! `HELP`/`TYPE` lines to name the sample (client_rust issue 194), and has no `# UNIT` or
//! `# EOF` lines. [`classic`] makes exactly those changes to the crate's output and no others.

use prometheus_client::registry::Registry;
use std::collections::HashSet;
use std::fmt;

/// The content type of OpenMetrics text, as `prometheus-client` writes it.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The content type of the classic Prometheus text format.
pub const CLASSIC_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What a daemon's metrics come from: it refreshes what it samples at scrape time (queue
/// depths, children up) and encodes its registry.
pub trait Source: Send + Sync + 'static {
    /// The daemon's metrics as OpenMetrics text ([`open_metrics`] of its registry).
    fn open_metrics(&self) -> Result<String, fmt::Error>;
}

/// `registry` as OpenMetrics text.
pub fn open_metrics(registry: &Registry) -> Result<String, fmt::Error> {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

/// One answer to `GET /metrics`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scrape {
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// The exposition.
    pub body: String,
}

/// The answer to a scrape whose `Accept` header is `accept`: OpenMetrics when it names
/// `application/openmetrics-text`, the classic text format otherwise.
pub fn scrape(source: &dyn Source, accept: Option<&str>) -> Result<Scrape, fmt::Error> {
    let text = source.open_metrics()?;
    let wants_open_metrics = accept.is_some_and(|a| a.contains("application/openmetrics-text"));
    Ok(if wants_open_metrics {
        Scrape {
            content_type: OPENMETRICS_CONTENT_TYPE,
            body: text,
        }
    } else {
        Scrape {
            content_type: CLASSIC_CONTENT_TYPE,
            body: classic(&text),
        }
    })
}

/// OpenMetrics text from `prometheus-client` in the classic text format 0.0.4: a counter's
/// `HELP` and `TYPE` lines name its `_total` sample, an `unknown` family is `untyped`, and the
/// `# UNIT` and `# EOF` lines go. Samples are left as they are.
pub fn classic(open_metrics: &str) -> String {
    let counters: HashSet<&str> = open_metrics
        .lines()
        .filter_map(|line| match type_line(line) {
            Some((name, "counter")) => Some(name),
            _ => None,
        })
        .collect();
    let mut out = String::with_capacity(open_metrics.len());
    for line in open_metrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        match descriptor(line) {
            Some((keyword, name, rest)) if counters.contains(name) => {
                out.push_str(&format!("# {keyword} {name}_total{rest}"));
            }
            Some(("TYPE", name, " unknown")) => out.push_str(&format!("# TYPE {name} untyped")),
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// The family name and type of a `# TYPE` line.
fn type_line(line: &str) -> Option<(&str, &str)> {
    let (keyword, name, rest) = descriptor(line)?;
    (keyword == "TYPE").then(|| (name, rest.trim_start()))
}

/// A `# HELP` or `# TYPE` line split into its keyword, family name and the rest (with its
/// leading space).
fn descriptor(line: &str) -> Option<(&str, &str, &str)> {
    let body = line.strip_prefix("# ")?;
    let (keyword, after) = body.split_once(' ')?;
    if keyword != "HELP" && keyword != "TYPE" {
        return None;
    }
    let end = after.find(' ').unwrap_or(after.len());
    Some((keyword, &after[..end], &after[end..]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
