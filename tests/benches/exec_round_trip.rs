//! The `exec` tool's cost per call through brokerd (issue 15): `exec ["true"]` from loopd's
//! broker port to the real brokerd (its socket, the grant, bubblewrap, the shim) and back,
//! against spawning `true` directly, p50 and p99. brokerd is started detached, as in
//! `broker_round_trip`, so the bench is not its parent.
//!
//! `cargo build --release -p brokerd -p bxsandbox --bins && cargo bench -p e2e --bench
//! exec_round_trip`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use bxcore::{CallId, Labels, SessionId};
use loopd::blocking::Blocking;
use loopd::broker::Broker;
use loopd::tools::ToolPort;
use proto::{ToolRequest, ToolResponse};
use std::process::Command;
use std::time::Instant;

mod support;
use support::report;

/// Calls measured per kind.
const RUNS: usize = 200;
/// Calls made first and not measured (the first runs page bubblewrap and the shim in).
const WARMUP: usize = 10;

fn main() {
    let running = support::start_brokerd(
        "[[grants]]\ntool = \"exec\"\nprograms = [\"true\"]\n",
        &["bxsandbox-shim"],
        "cargo build --release -p brokerd -p bxsandbox --bins",
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let broker = Broker::new(
        running.socket.clone(),
        30_000,
        Blocking::new(rt.handle().clone()),
    );
    let request = |n: usize| ToolRequest {
        session: SessionId::new("bench").unwrap(),
        turn: 1,
        call: CallId(n as u64),
        tool: "exec".into(),
        arguments: "{\"argv\":[\"true\"]}".into(),
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    };
    let mut through_brokerd = Vec::with_capacity(RUNS);
    let mut direct = Vec::with_capacity(RUNS);
    for n in 0..WARMUP + RUNS {
        let started = Instant::now();
        let answer = ToolPort::call(&broker, &request(n));
        let took = started.elapsed();
        assert!(
            matches!(&answer, ToolResponse::Result { content, .. }
                if content.starts_with("status: exited with status 0\n")),
            "call {n}: {answer:?}"
        );
        let started = Instant::now();
        let status = Command::new("true").status().unwrap();
        let direct_took = started.elapsed();
        assert!(status.success());
        if n >= WARMUP {
            through_brokerd.push(took);
            direct.push(direct_took);
        }
    }
    report(
        "exec [\"true\"] loopd -> brokerd -> sandbox -> loopd",
        through_brokerd,
    );
    report("spawn true directly", direct);
}
