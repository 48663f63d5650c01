//! Session store benchmarks: append with fdatasync (records/s), the open of a
//! 100 000-record session (verify every line's digest chain, rebuild the state), and the
//! session list of 1 000 sessions of 1 000 records: from the index, and by reading every log
//! (what `GET /v1/sessions` did before issue 14).
//!
//! `cargo bench -p loopd --bench session_store`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

#[path = "support/records.rs"]
mod records;

use bxcore::SessionId;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopd::session::Store;
use records::tool_result;

/// Records in the session that the open benchmark reads.
const OPEN_RECORDS: u64 = 100_000;
/// Sessions, and records in each, that the list benchmark lists.
const LIST_SESSIONS: u64 = 1_000;
const LIST_RECORDS: u64 = 1_000;

fn append(c: &mut Criterion) {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let mut session = store.create(&SessionId::new("bench").unwrap()).unwrap();
    let mut group = c.benchmark_group("session_store");
    group.throughput(Throughput::Elements(1));
    let mut n = 0;
    group.bench_function("append_fdatasync", |b| {
        b.iter(|| {
            n += 1;
            session.append(tool_result(n)).unwrap()
        })
    });
    group.finish();
}

fn open(c: &mut Criterion) {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let id = SessionId::new("big").unwrap();
    {
        let mut session = store.create(&id).unwrap();
        for n in 1..OPEN_RECORDS {
            session.append(tool_result(n)).unwrap();
        }
    }
    let mut group = c.benchmark_group("session_store");
    group.sample_size(10);
    group.throughput(Throughput::Elements(OPEN_RECORDS));
    group.bench_function("open_100k_records", |b| {
        b.iter(|| store.open(&id).unwrap().records().len())
    });
    group.finish();
}

/// A directory for the list benchmark's million records: in memory where the system has one
/// (`/dev/shm`), since only the listing is measured, not the writes that make it.
fn list_state() -> tempfile::TempDir {
    match tempfile::tempdir_in("/dev/shm") {
        Ok(dir) => dir,
        Err(_) => tempfile::tempdir().unwrap(),
    }
}

fn list(c: &mut Criterion) {
    let state = list_state();
    let store = Store::new(state.path()).unwrap();
    for s in 0..LIST_SESSIONS {
        let mut session = store
            .create(&SessionId::new(&format!("s{s:04}")).unwrap())
            .unwrap();
        for n in 1..LIST_RECORDS {
            session.append(tool_result(n)).unwrap();
        }
    }
    // A fresh store, as at a daemon's start: its first listing builds the index.
    let store = Store::new(state.path()).unwrap();
    let started = std::time::Instant::now();
    assert_eq!(store.summaries().unwrap().len() as u64, LIST_SESSIONS);
    println!(
        "session_store/list_build_index_1000x1000: {:.0} ms (once, at start)",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let mut group = c.benchmark_group("session_store");
    group.sample_size(10);
    group.bench_function("list_1000_sessions_from_the_index", |b| {
        b.iter(|| store.summaries().unwrap().len())
    });
    group.bench_function("list_1000_sessions_reading_every_log", |b| {
        b.iter(|| {
            let ids = store.list().unwrap();
            ids.iter()
                .map(|id| store.read(id).unwrap().len())
                .sum::<usize>()
        })
    });
    group.finish();
}

criterion_group!(benches, append, open, list);
criterion_main!(benches);
