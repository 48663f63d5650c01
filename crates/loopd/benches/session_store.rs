//! Session store benchmarks: append with fdatasync (records/s) and the open of a
//! 100 000-record session (verify every line's digest chain, rebuild the state).
//!
//! `cargo bench -p loopd --bench session_store`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use bxcore::{CallId, DataClass, LogRecord, SessionId, Timestamp, ToolOutcome};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use loopd::session::Store;

/// Records in the session that the open benchmark reads.
const OPEN_RECORDS: u64 = 100_000;

fn tool_result(n: u64) -> LogRecord {
    LogRecord::ToolResult {
        time: Timestamp::now(),
        call: CallId(n),
        tool_call_id: format!("call{n}"),
        content: "a tool result of a typical short length, about one line of text".into(),
        class: DataClass::Internal,
        untrusted: false,
        truncated: false,
        outcome: ToolOutcome::Ok,
        by_loopd: false,
    }
}

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

criterion_group!(benches, append, open);
criterion_main!(benches);
