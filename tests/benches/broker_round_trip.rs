//! A tool call's round trip from loopd's broker port to the real brokerd and back: an `echo`
//! that runs and a call that is denied (no grant), p50/p99; then brokerd's RSS, idle and after
//! the calls. brokerd is started detached (through a shell that exits at once), so the bench is
//! not its parent: its peer check reads the caller's `/proc` entry as it reads loopd's under
//! boxd.
//!
//! `cargo build --release -p brokerd && cargo bench -p e2e --bench broker_round_trip`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use bxcore::{CallId, Labels, SessionId};
use loopd::blocking::Blocking;
use loopd::broker::Broker;
use proto::{ToolRequest, ToolResponse};
use std::time::Instant;

mod support;
use support::report;

/// Calls measured per kind.
const CALLS: usize = 2_000;

fn rss_kb(pid: u32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("?")
        .to_string()
}

fn main() {
    let running = support::start_brokerd(
        "[[grants]]\ntool = \"echo\"\n",
        &[],
        "cargo build --release -p brokerd",
    );
    println!(
        "brokerd idle: RSS {} kB (peak {} kB)",
        rss_kb(running.process.0, "VmRSS:"),
        rss_kb(running.process.0, "VmHWM:")
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let broker = Broker::new(
        running.socket.clone(),
        5_000,
        Blocking::new(rt.handle().clone()),
    );
    let request = |n: usize, tool: &str| ToolRequest {
        session: SessionId::new("bench").unwrap(),
        turn: 1,
        call: CallId(n as u64),
        tool: tool.into(),
        arguments: "{\"text\":\"ping\"}".into(),
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    };
    use loopd::tools::ToolPort;
    for (tool, expect_denied) in [("echo", false), ("read_file", true)] {
        let mut samples = Vec::with_capacity(CALLS);
        for n in 0..CALLS {
            let started = Instant::now();
            let answer = ToolPort::call(&broker, &request(n, tool));
            samples.push(started.elapsed());
            assert_eq!(
                matches!(answer, ToolResponse::Denied { .. }),
                expect_denied,
                "{answer:?}"
            );
        }
        let kind = if expect_denied {
            "denied (no grant)"
        } else {
            "echo"
        };
        report(&format!("loopd -> brokerd -> loopd, {kind}"), samples);
    }
    println!(
        "brokerd after {} calls: RSS {} kB (peak {} kB)",
        2 * CALLS,
        rss_kb(running.process.0, "VmRSS:"),
        rss_kb(running.process.0, "VmHWM:")
    );
}
