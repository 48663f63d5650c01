//! The sandbox's cost per run (issue 15): `run` of `true` inside bubblewrap with the shim
//! against spawning `true` directly, p50 and p99.
//!
//! `cargo build -p bxsandbox --bins --release && cargo bench -p bxsandbox --bench exec_overhead`
//!
//! The shim is taken from the target directory's `release` (else `debug`) folder.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use bxsandbox::{ProbeOptions, Spec, Status};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Runs measured per case, after the warm-up.
const RUNS: usize = 200;
const WARMUP: usize = 10;

fn shim() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    ["release", "debug"]
        .iter()
        .map(|profile| target.join(profile).join("bxsandbox-shim"))
        .find(|p| p.is_file())
        .expect("build the shim first: cargo build -p bxsandbox --bins --release")
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    (ms(at(0.50)), ms(at(0.99)))
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = ProbeOptions {
        shim: Some(shim()),
        ..ProbeOptions::from_env()
    };
    let walls = rt
        .block_on(bxsandbox::probe(&options))
        .expect("the sandbox");
    let spec = Spec::new(["true"]);

    let mut sandboxed = Vec::with_capacity(RUNS);
    let mut direct = Vec::with_capacity(RUNS);
    for i in 0..WARMUP + RUNS {
        let start = Instant::now();
        let outcome = rt.block_on(bxsandbox::run(&spec, &walls)).unwrap();
        let took = start.elapsed();
        assert_eq!(outcome.status, Status::Exited(0));
        let start = Instant::now();
        let status = rt
            .block_on(async { tokio::process::Command::new("true").status().await })
            .unwrap();
        let took_direct = start.elapsed();
        assert!(status.success());
        if i >= WARMUP {
            sandboxed.push(took);
            direct.push(took_direct);
        }
    }
    let (p50, p99) = percentiles(sandboxed);
    let (d50, d99) = percentiles(direct);
    println!("walls: {}", walls.describe());
    println!("run(true) in the sandbox: p50 {p50:.2} ms, p99 {p99:.2} ms ({RUNS} runs)");
    println!("spawn(true) directly:     p50 {d50:.2} ms, p99 {d99:.2} ms");
    println!("overhead at p50: {:.2} ms", p50 - d50);
}
