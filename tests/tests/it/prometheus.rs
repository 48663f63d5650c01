#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A real Prometheus (Debian's, `$PROMETHEUS`) scrapes a running stack over loopback, and its
//! HTTP API must show loopd's turn and token series with the values the session log says
//! (docs/metrics.md). Skipped without Prometheus unless `BOXMAKER_REQUIRE_PROMETHEUS=1`.

use bxcore::{LogRecord, SessionId, Usage};
use e2e::prometheus::{self, Prometheus, TargetState};
use e2e::{Stack, StackOptions, show};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// How long Prometheus has to scrape what a test waits for: several scrape intervals.
const SCRAPE_WAIT_MS: u64 = 30_000;

/// Polls `done` (which says what it still waits for) until it gives `Ok`, or panics after
/// `limit_ms` with the last thing it waited for.
fn wait_for<T>(limit_ms: u64, mut done: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + Duration::from_millis(limit_ms);
    loop {
        match done() {
            Ok(value) => return value,
            Err(waiting) if Instant::now() > deadline => {
                panic!("still waiting after {limit_ms} ms: {waiting}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The target of `job`, once Prometheus has tried to scrape it (`health` is no longer
/// `unknown`).
fn scraped_target(prometheus: &Prometheus, job: &str) -> TargetState {
    wait_for(SCRAPE_WAIT_MS, || {
        let targets = prometheus.targets()?;
        targets
            .iter()
            .find(|t| t.job == job && t.health != "unknown")
            .cloned()
            .ok_or_else(|| format!("a scrape of {job}; targets: {targets:?}"))
    })
}

#[test]
fn prometheus_starts_lists_a_down_target_and_dies_with_its_handle() {
    let Some(binary) = prometheus::binary_or_skip() else {
        return;
    };
    let _machine = e2e::real::heavy();
    // Nothing listens here: the target must show up, down, with the reason.
    let nobody: SocketAddr = format!("127.0.0.1:{}", prometheus::free_port().unwrap())
        .parse()
        .unwrap();
    let prometheus = Prometheus::start(&binary, &[("loopd", nobody)]).unwrap();
    let target = scraped_target(&prometheus, "loopd");
    assert_eq!(target.health, "down", "{target:?}");
    assert_eq!(target.scrape_url, format!("http://{nobody}/metrics"));
    assert!(target.last_error.contains("refused"), "{target:?}");
    assert_eq!(
        prometheus.value("sum(up{job=\"loopd\"})").unwrap(),
        Some(0.0)
    );

    // Dropped, it is killed and reaped: its port no longer answers.
    let port = prometheus.port;
    drop(prometheus);
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

/// The sums of the model calls' usage in `records`: (calls, evaluated, cached, generated).
fn usage_totals(records: &[LogRecord]) -> (u64, u64, u64, u64) {
    let usages: Vec<Usage> = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::Assistant { usage, .. } => *usage,
            _ => None,
        })
        .collect();
    (
        usages.len() as u64,
        usages
            .iter()
            .map(|u| u.prompt_tokens - u.cached_tokens)
            .sum(),
        usages.iter().map(|u| u.cached_tokens).sum(),
        usages.iter().map(|u| u.completion_tokens).sum(),
    )
}

#[test]
fn prometheus_scrapes_loopds_turn_and_token_series_of_two_tasks() {
    let Some(binary) = prometheus::binary_or_skip() else {
        return;
    };
    let _machine = e2e::real::heavy();
    let metrics: SocketAddr = format!("127.0.0.1:{}", prometheus::free_port().unwrap())
        .parse()
        .unwrap();
    let stack = Stack::start(StackOptions {
        script: "default_reply = \"Counted and measured.\"\n".to_string(),
        loopd_toml: format!("[metrics]\nlisten = \"{metrics}\"\n"),
        ..StackOptions::default()
    })
    .unwrap();
    let prometheus = Prometheus::start(&binary, &[("loopd", metrics)]).unwrap();

    // Two tasks in one session: the second one's prompt is partly served from the cache.
    for task in ["count the first one", "and the second one"] {
        let out = stack.boxctl(&["task", "--session", "metered", task]);
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let records = store.read(&SessionId::new("metered").unwrap()).unwrap();
    let (calls, evaluated, cached, generated) = usage_totals(&records);
    assert_eq!(calls, 2, "{records:?}");
    assert!(generated > 0, "{records:?}");

    let target = scraped_target(&prometheus, "loopd");
    assert_eq!(
        target.health, "up",
        "Prometheus cannot scrape loopd's [metrics] listen: {target:?}"
    );
    // What Prometheus must end up with; a series that is not there yet reads as missing.
    let expected = [
        ("sum(loopd_turns_total{outcome=\"done\"})", 2),
        ("sum(loopd_turns_total)", 2),
        ("sum(loopd_turn_duration_seconds_count)", 2),
        ("sum(loopd_model_calls_total{role=\"main\"})", calls),
        ("sum(loopd_prompt_evaluated_tokens_total)", evaluated),
        ("sum(loopd_prompt_cached_tokens_total)", cached),
        ("sum(loopd_generated_tokens_total)", generated),
    ];
    wait_for(SCRAPE_WAIT_MS, || {
        let mut wrong = Vec::new();
        for (promql, want) in expected {
            let got = prometheus.value(promql)?;
            if got != Some(want as f64) {
                wrong.push(format!("{promql} = {got:?}, want {want}"));
            }
        }
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join("; "))
        }
    });
}
