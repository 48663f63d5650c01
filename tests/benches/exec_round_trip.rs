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
use e2e::bin_dir;
use loopd::blocking::Blocking;
use loopd::broker::Broker;
use loopd::tools::ToolPort;
use proto::{ToolRequest, ToolResponse};
use std::process::Command;
use std::time::{Duration, Instant};

/// Calls measured per kind.
const RUNS: usize = 200;
/// Calls made first and not measured (the first runs page bubblewrap and the shim in).
const WARMUP: usize = 10;
/// How long brokerd may take to serve its socket.
const START_WAIT: Duration = Duration::from_secs(20);

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    println!(
        "{name}: n={} p50={:.2} ms p99={:.2} ms",
        samples.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3
    );
}

/// A process this bench started but is not the parent of; killed when dropped.
struct Detached(u32);

impl Drop for Detached {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.to_string()).status();
    }
}

fn main() {
    let brokerd = bin_dir().join("brokerd");
    let shim = bin_dir().join("bxsandbox-shim");
    assert!(
        brokerd.is_file() && shim.is_file(),
        "{} or {} is missing: run `cargo build --release -p brokerd -p bxsandbox --bins` first",
        brokerd.display(),
        shim.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("brokerd.sock");
    let config = dir.path().join("brokerd.toml");
    std::fs::write(
        &config,
        format!(
            "socket = {socket:?}\nstate_dir = {:?}\n[[grants]]\ntool = \"exec\"\n\
             programs = [\"true\"]\n",
            dir.path().join("state")
        ),
    )
    .unwrap();
    let started = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" --config \"$1\" >/dev/null 2>&1 </dev/null & echo $!")
        .arg(&brokerd)
        .arg(&config)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let pid: u32 = String::from_utf8_lossy(&started.stdout)
        .trim()
        .parse()
        .unwrap();
    let _running = Detached(pid);
    let deadline = Instant::now() + START_WAIT;
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "brokerd did not start");
        std::thread::sleep(Duration::from_millis(20));
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let broker = Broker::new(socket, 30_000, Blocking::new(rt.handle().clone()));
    let request = |n: usize| ToolRequest {
        session: SessionId::new("bench").unwrap(),
        turn: 1,
        call: CallId(n as u64),
        tool: "exec".into(),
        arguments: "{\"argv\":[\"true\"]}".into(),
        context: Labels::PUBLIC,
        counts_for: None,
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
