#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The session list comes from the store's index (issue 14): built once from the logs, then
//! kept up to date by every append and open, so listing reads no log.

use crate::session::{LOG_FILE, Store, Summary};
use bxcore::{LogRecord, SessionId, Timestamp};

fn id(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn user(turn: u64) -> LogRecord {
    LogRecord::User {
        time: Timestamp::now(),
        turn,
        content: format!("task {turn}"),
        task_id: None,
    }
}

fn summary(store: &Store, s: &str) -> Summary {
    store
        .summaries()
        .unwrap()
        .into_iter()
        .find(|(i, _)| i.as_str() == s)
        .map(|(_, summary)| summary)
        .unwrap_or_else(|| panic!("{s} is not listed"))
}

#[test]
fn the_list_is_built_from_the_logs_then_follows_appends_without_reading_a_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::new(dir.path()).unwrap();
        let mut a = store.create(&id("a")).unwrap();
        a.append(user(1)).unwrap();
    }
    // A new store (a restarted loopd) builds its index from what is on disk.
    let store = Store::new(dir.path()).unwrap();
    assert_eq!(
        summary(&store, "a"),
        Summary {
            records: 2,
            last_turn: 1,
            open_turn: Some(1)
        }
    );
    // Once built, listing reads no log: a log emptied behind loopd's back is still listed as
    // the index knows it (reading it would find no header and list it with zeros).
    std::fs::write(store.dir(&id("a")).join(LOG_FILE), b"").unwrap();
    assert_eq!(summary(&store, "a").records, 2);

    // Appends, in sessions old and new, reach the list.
    let mut b = store.create(&id("b")).unwrap();
    assert!(
        store
            .summaries()
            .unwrap()
            .iter()
            .all(|(i, _)| i.as_str() != "b"),
        "not listed before its first record"
    );
    b.append(user(1)).unwrap();
    assert_eq!(
        summary(&store, "b"),
        Summary {
            records: 2,
            last_turn: 1,
            open_turn: Some(1)
        }
    );
    // Through a store a session hands out (a subagent's child is made there) too.
    let child_store = b.store();
    let mut child = child_store.create(&id("sub-b-1")).unwrap();
    child.append(user(1)).unwrap();
    assert_eq!(summary(&store, "sub-b-1").last_turn, 1);
    let ids: Vec<String> = store
        .summaries()
        .unwrap()
        .into_iter()
        .map(|(i, _)| i.to_string())
        .collect();
    assert_eq!(ids, ["a", "b", "sub-b-1"]);
}

#[test]
fn opening_a_session_that_a_crash_left_mid_turn_updates_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::new(dir.path()).unwrap();
    {
        let mut s = store.create(&id("s")).unwrap();
        s.append(user(1)).unwrap();
    }
    assert_eq!(summary(&store, "s").records, 2);
    // Open ends the unfinished turn as interrupted: one record more.
    let s = store.open(&id("s")).unwrap();
    assert_eq!(s.records().len(), 3);
    assert_eq!(summary(&store, "s").records, 3);
}
