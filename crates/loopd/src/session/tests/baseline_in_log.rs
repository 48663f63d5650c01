#![allow(clippy::unwrap_used, clippy::expect_used)]
//! An epoch's baseline in the log (format 2): appended with no sync of its own, durable with
//! the turn's next synced record. What a crash can leave of it: the whole line (the turn is
//! interrupted and the next one keeps the baseline), a torn line (cut, and the baseline is
//! written again), never a baseline the log cannot read back without saying where.

use crate::session::{Baseline, LOG_FILE, Session, Store, StoreError};
use bxcore::{LogRecord, SessionId, Timestamp};

fn id() -> SessionId {
    SessionId::new("s").unwrap()
}

fn baseline(system: &str) -> Baseline {
    Baseline {
        version: crate::session::BASELINE_FORMAT_VERSION,
        epoch: 0,
        time: Timestamp::now(),
        system: system.into(),
        memory: String::new(),
        memory_labels: bxcore::Labels::PUBLIC,
        tools: Vec::new(),
        tools_labels: bxcore::Labels::PUBLIC,
    }
}

/// A new session with its first turn's user record and baseline written, then dropped
/// before anything else: what a kill -9 between the baseline and the model's answer leaves.
fn cut_after_the_baseline(store: &Store, first: &Baseline) -> u64 {
    let mut session = store.create(&id()).unwrap();
    session.append(user(1)).unwrap();
    let before = session.data_syncs();
    session.write_baseline(first.clone()).unwrap();
    assert_eq!(session.data_syncs(), before, "no sync of its own");
    len_of(&session)
}

fn user(turn: u64) -> LogRecord {
    LogRecord::User {
        time: Timestamp::now(),
        turn,
        content: "hi".into(),
        task_id: None,
    }
}

fn len_of(session: &Session) -> u64 {
    std::fs::metadata(session.dir().join(LOG_FILE))
        .unwrap()
        .len()
}

fn kinds(session: &Session) -> Vec<&'static str> {
    session.records().iter().map(LogRecord::kind).collect()
}

#[test]
fn a_turn_cut_after_its_baseline_is_interrupted_and_the_next_keeps_the_baseline() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let first = baseline("You are a test.");
    cut_after_the_baseline(&store, &first);
    let mut reopened = store.open(&id()).unwrap();
    assert_eq!(kinds(&reopened), ["header", "user", "baseline", "turn_end"]);
    assert_eq!(reopened.current_baseline(), Some(&first));
    let again = reopened.write_baseline(baseline("another")).unwrap_err();
    assert!(
        matches!(again, StoreError::BaselineExists { epoch: 0, .. }),
        "{again}"
    );
}

#[test]
fn a_torn_baseline_line_is_cut_and_the_baseline_written_again() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let first = baseline("You are a test.");
    let whole = cut_after_the_baseline(&store, &first);
    let log = store.dir(&id()).join(LOG_FILE);
    let bytes = std::fs::read(&log).unwrap();
    let line_start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap() as u64
        + 1;
    // Every cut inside the baseline's line loses only that line.
    for cut in [line_start + 1, (line_start + whole) / 2, whole - 1] {
        let copy = tempfile::tempdir().unwrap();
        let dir = copy.path().join("sessions").join("s");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(LOG_FILE), &bytes[..cut as usize]).unwrap();
        let store = Store::new(copy.path()).unwrap();
        let mut reopened = store.open(&id()).unwrap();
        assert_eq!(
            kinds(&reopened),
            ["header", "user", "turn_end"],
            "cut at {cut}"
        );
        assert_eq!(reopened.current_baseline(), None);
        reopened.append(user(2)).unwrap();
        let second = baseline("You are a test, again.");
        reopened.write_baseline(second.clone()).unwrap();
        assert_eq!(reopened.current_baseline(), Some(&second));
    }
}

#[test]
fn a_baseline_record_that_is_not_a_baseline_is_named_with_its_line() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let mut session = store.create(&id()).unwrap();
    session.append(user(1)).unwrap();
    session
        .append(LogRecord::Baseline {
            epoch: 0,
            baseline: serde_json::json!({"system": 7}),
        })
        .unwrap();
    drop(session);
    let err = store.open(&id()).unwrap_err();
    assert!(
        matches!(&err, StoreError::Corrupt { line: 3, why, .. } if why.contains("not a baseline")),
        "{err}"
    );
}
