#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Metrics, usage accounts and a turn budget on the real default model (Qwen2.5-Coder-0.5B
//! behind the real llama-server): the accounts equal what the session log's usage says, the
//! second turn's prompt is partly served from the cache, a turn budget ends a turn `budget`
//! (boxctl exit 7) naming the budget, and loopd's `/metrics` with the real server's timings
//! passes `promtool check metrics`.

use bxcore::{LogRecord, SessionId, TurnEnd};
use e2e::real::{LlamaServer, RealParts, boxctl_within, one_at_a_time, template};
use e2e::{Stack, show};
use proto::api::UsageReport;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The longest one real task may take on 2 cores.
const TASK_LIMIT_MS: u64 = 240_000;

/// boxctl's exit code for a turn that stopped at a budget.
const EXIT_BUDGET: i32 = 7;

/// The usage records' sums of `session`'s log: (evaluated, cached, generated, model calls).
fn logged(stack: &Stack, session: &str) -> (u64, u64, u64, u64) {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let records = store.read(&SessionId::new(session).unwrap()).unwrap();
    let usages: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::Assistant { usage, .. } => *usage,
            _ => None,
        })
        .collect();
    (
        usages
            .iter()
            .map(|u| u.prompt_tokens - u.cached_tokens)
            .sum(),
        usages.iter().map(|u| u.cached_tokens).sum(),
        usages.iter().map(|u| u.completion_tokens).sum(),
        usages.len() as u64,
    )
}

/// The turn ends of `session`'s log.
fn ends(stack: &Stack, session: &str) -> Vec<TurnEnd> {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let records = store.read(&SessionId::new(session).unwrap()).unwrap();
    records
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::TurnEnd { end, .. } => Some(end),
            _ => None,
        })
        .collect()
}

/// `GET /metrics` from loopd's TCP listener at `addr`, in the classic format.
fn scrape(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    // The listener answers only a request that names it (DNS rebinding: docs/metrics.md).
    let head = format!("GET /metrics HTTP/1.1\r\nhost: {addr}\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// The value of the sample line `name` (labels included, exactly) in `text`.
fn sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn qwen_turns_are_accounted_and_metered_and_a_turn_budget_ends_one() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let _one = one_at_a_time();
    let file = template("qwen2.5-tools.jinja");
    let mut args = vec!["-c", "4096", "--parallel", "3"];
    args.extend(["--temp", "0", "--seed", "7"]);
    args.extend(["--chat-template-file", file.to_str().unwrap()]);
    let server = LlamaServer::start(&parts.llama_server, &parts.qwen, &args).unwrap();
    let port = e2e::prometheus::free_port().unwrap();
    let metrics: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let toml = format!(
        "[loop]\nmax_steps = 2\n[metrics]\nlisten = \"{metrics}\"\n\
         [[budgets.sessions]]\nmatch = \"tight\"\nmax_generated_tokens_per_turn = 4\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let stack = Stack::with_model(dir, server.running, server.url, &toml).unwrap();
    let limit = Duration::from_millis(TASK_LIMIT_MS);

    for task in [
        "Answer with one short sentence: is the sky blue?",
        "Answer with one short sentence: is grass green?",
    ] {
        let out = boxctl_within(&stack, &["task", "--session", "counted", task], limit).unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }
    let out = boxctl_within(
        &stack,
        &[
            "task",
            "--session",
            "tight",
            "Write a long paragraph about the sea.",
        ],
        limit,
    )
    .unwrap();
    assert_eq!(out.status.code(), Some(EXIT_BUDGET), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("max_generated_tokens_per_turn"), "{said}");
    match ends(&stack, "tight").as_slice() {
        [TurnEnd::Budget { budget, message }] => {
            assert_eq!(budget, "max_generated_tokens_per_turn");
            assert!(message.contains("is 4"), "{message}");
        }
        other => panic!("expected one budget end, got {other:?}"),
    }

    // The accounts equal the log, and the second turn reused the first one's prefix.
    let (evaluated, cached, generated, calls) = logged(&stack, "counted");
    let out = stack.boxctl(&["usage", "counted", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let report: UsageReport = serde_json::from_slice(&out.stdout).unwrap();
    let totals = report.totals;
    assert_eq!(totals.turns, 2, "{report:?}");
    assert_eq!(totals.model_calls, calls, "{report:?}");
    assert_eq!(totals.generated_tokens, generated, "{report:?}");
    assert_eq!(totals.evaluated_tokens, evaluated, "{report:?}");
    assert_eq!(totals.cached_tokens, cached, "{report:?}");
    assert!(
        cached > 0,
        "the second turn's prompt was not served from the cache"
    );
    assert!(totals.model_ms > 0, "{report:?}");

    // The metrics say the same, and Prometheus' own linter accepts them.
    let text = scrape(metrics);
    assert_eq!(
        sample(&text, "loopd_turns_total{outcome=\"done\"}"),
        Some(2.0)
    );
    assert_eq!(
        sample(&text, "loopd_turns_total{outcome=\"budget\"}"),
        Some(1.0)
    );
    let (_, _, tight_generated, _) = logged(&stack, "tight");
    assert_eq!(
        sample(&text, "loopd_generated_tokens_total{role=\"main\"}"),
        Some((generated + tight_generated) as f64),
        "{text}"
    );
    if let Some(promtool) = bxmetrics::testing::promtool_or_skip() {
        bxmetrics::testing::promtool_check_with(&promtool, &text).unwrap();
    }
}
