//! The leak guard's cost (issue 19): building the guard for 16 secrets, `find` over an
//! outgoing request (a 2 KiB URL and headers, and a 256 KiB body), and `redact` of a 64 KiB
//! result (the default `limits.result_cap_bytes`) with and without a secret in it.
//!
//! `cargo bench -p brokerd --bench leak_guard`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use brokerd::secrets::Secrets;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

/// How many secrets the box holds in the bench.
const SECRETS: usize = 16;

fn values() -> Vec<(String, String)> {
    (0..SECRETS)
        .map(|i| {
            (
                format!("s{i}"),
                format!("ghp_{i:02}aB3dEf6hIj9kLmN0pQr5tUvWx"),
            )
        })
        .collect()
}

fn secrets() -> Secrets {
    let values = values();
    Secrets::from_values(values.iter().map(|(n, v)| (n.as_str(), v.as_str())))
}

/// `len` bytes of ordinary text (a page of words and numbers, lines of 80).
fn text(len: usize) -> String {
    let line = "The quick brown fox 0123456789 jumps over the lazy dog; size: 16768 bytes.\n";
    line.repeat(len / line.len() + 1)[..len].to_string()
}

fn build(c: &mut Criterion) {
    let values = values();
    c.bench_function("guard_build_16_secrets", |b| {
        b.iter(|| Secrets::from_values(values.iter().map(|(n, v)| (n.as_str(), v.as_str()))))
    });
}

fn find(c: &mut Criterion) {
    let secrets = secrets();
    let mut group = c.benchmark_group("guard_find");
    for len in [2 * 1024, 256 * 1024] {
        let clean = text(len);
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_with_input(BenchmarkId::new("clean", len), &clean, |b, t| {
            b.iter(|| black_box(secrets.guard().find(t.as_bytes())))
        });
    }
    group.finish();
}

fn redact(c: &mut Criterion) {
    let secrets = secrets();
    let (_, value) = &values()[7];
    let len = 64 * 1024;
    let clean = text(len);
    let mut dirty = text(len - value.len());
    dirty.insert_str(len / 2, value);
    let mut group = c.benchmark_group("guard_redact_64k");
    group.throughput(Throughput::Bytes(len as u64));
    group.bench_function("clean", |b| {
        b.iter(|| black_box(secrets.guard().redact(&clean)))
    });
    group.bench_function("one_secret", |b| {
        b.iter(|| black_box(secrets.guard().redact(&dirty)))
    });
    group.bench_function("clean_cut", |b| {
        b.iter(|| black_box(secrets.guard().redact_cut(&clean)))
    });
    group.finish();
}

criterion_group!(benches, build, find, redact);
criterion_main!(benches);
