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
use e2e::bin_dir;
use loopd::blocking::Blocking;
use loopd::broker::Broker;
use proto::{ToolRequest, ToolResponse};
use std::process::Command;
use std::time::{Duration, Instant};

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

fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    println!(
        "{name}: n={} p50={:?} p99={:?}",
        samples.len(),
        at(0.5),
        at(0.99)
    );
}

/// A process this bench started but is not the parent of; killed when dropped.
struct Detached(u32);

impl Detached {
    fn id(&self) -> u32 {
        self.0
    }
}

impl Drop for Detached {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.to_string()).status();
    }
}

fn main() {
    let brokerd = bin_dir().join("brokerd");
    assert!(
        brokerd.is_file(),
        "{} is missing: run `cargo build --release -p brokerd` first",
        brokerd.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("brokerd.sock");
    let config = dir.path().join("brokerd.toml");
    std::fs::write(
        &config,
        format!(
            "socket = {socket:?}\nstate_dir = {:?}\n[[grants]]\ntool = \"echo\"\n",
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
    let running = Detached(pid);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "brokerd did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "brokerd idle: RSS {} kB (peak {} kB)",
        rss_kb(running.id(), "VmRSS:"),
        rss_kb(running.id(), "VmHWM:")
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let broker = Broker::new(socket, 5_000, Blocking::new(rt.handle().clone()));
    let request = |n: usize, tool: &str| ToolRequest {
        session: SessionId::new("bench").unwrap(),
        turn: 1,
        call: CallId(n as u64),
        tool: tool.into(),
        arguments: "{\"text\":\"ping\"}".into(),
        context: Labels::PUBLIC,
        counts_for: None,
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
        rss_kb(running.id(), "VmRSS:"),
        rss_kb(running.id(), "VmHWM:")
    );
}
