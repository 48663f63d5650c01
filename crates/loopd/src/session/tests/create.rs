#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Creating a session is atomic, and what a crash or a full disk left behind never makes a
//! session id unusable: the crash states are made on disk directly, as a crash between the
//! steps of creation (or an older loopd's) leaves them.

use crate::session::{LOG_FILE, Store, StoreError};
use bxcore::{LogRecord, SessionId};
use std::path::{Path, PathBuf};

fn id(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

/// A store in a new temporary state directory, and its `sessions/` directory.
fn store() -> (tempfile::TempDir, Store, PathBuf) {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let sessions = state.path().join("sessions");
    (state, store, sessions)
}

/// The first bytes of a header line: what a crash mid-write of the first line leaves.
const TORN_HEADER: &[u8] = b"{\"type\":\"header\",\"version\":1,\"ses";

/// Session `s` made in `store`: begun, and put in place by its first record (a note).
fn made(store: &Store, s: &str) -> crate::session::Session {
    let mut session = store.create(&id(s)).unwrap();
    session.append(note()).unwrap();
    session
}

fn note() -> LogRecord {
    LogRecord::Note {
        time: bxcore::Timestamp::now(),
        text: "made".into(),
    }
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_directory_left_without_a_log_does_not_make_the_id_unusable() {
    let (_state, store, sessions) = store();
    // A crash between making the directory and linking its first line into place.
    write(&sessions.join("x").join("log.tmp.4242"), TORN_HEADER);
    assert!(matches!(store.read(&id("x")), Err(StoreError::NotFound(_))));
    assert!(!store.exists(&id("x")));
    assert!(store.list().unwrap().is_empty());

    let mut session = store.open_or_create(&id("x")).unwrap();
    assert!(matches!(session.records(), [LogRecord::Header { .. }]));
    session.append(note()).unwrap();
    drop(session);
    assert_eq!(store.list().unwrap(), vec![id("x")]);
    assert!(matches!(
        store.read(&id("x")).unwrap().as_slice(),
        [LogRecord::Header { .. }, LogRecord::Note { .. }]
    ));
    assert!(
        !sessions.join("x").join("log.tmp.4242").exists(),
        "the leftover is gone"
    );
}

#[test]
fn an_empty_directory_left_by_a_crash_does_not_make_the_id_unusable() {
    let (_state, store, sessions) = store();
    std::fs::create_dir(sessions.join("e")).unwrap();
    let session = store.create(&id("e")).unwrap();
    assert!(matches!(session.records(), [LogRecord::Header { .. }]));
}

#[test]
fn a_session_that_exists_is_never_created_again() {
    let (_state, store, _sessions) = store();
    drop(made(&store, "a"));
    assert!(matches!(store.create(&id("a")), Err(StoreError::Exists(_))));
    assert_eq!(store.read(&id("a")).unwrap().len(), 2);
}

#[test]
fn a_session_dropped_before_its_first_record_is_not_made() {
    // A task refused before its user record (a spent budget, a task id run before) leaves no
    // session, and nothing of one on disk.
    let (_state, store, sessions) = store();
    let session = store.create(&id("n")).unwrap();
    assert!(matches!(session.records(), [LogRecord::Header { .. }]));
    assert!(!store.exists(&id("n")), "not before its first record");
    drop(session);
    assert!(!store.exists(&id("n")));
    assert!(store.list().unwrap().is_empty());
    let left: Vec<_> = std::fs::read_dir(&sessions).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    // The id is free: made now, it is whole.
    drop(made(&store, "n"));
    assert_eq!(store.read(&id("n")).unwrap().len(), 2);
}

#[test]
fn a_new_session_is_made_by_its_first_record_in_one_file_sync_and_two_directory_syncs() {
    // Issue 36: a new session cost a synced header file, its directory, the sessions
    // directory, then its first record's sync. The header now reaches the disk with the
    // first record; then the session's directory (the log's name) and the sessions
    // directory (the session's name) are synced, and nothing less is durable.
    let (_state, store, _sessions) = store();
    let before = store.syncs();
    drop(made(&store, "s"));
    assert_eq!(store.syncs() - before, 3);
    assert!(store.exists(&id("s")));
}

#[test]
fn a_directory_without_a_log_holding_files_loopd_did_not_make_is_refused_and_left_alone() {
    let (_state, store, sessions) = store();
    write(&sessions.join("y").join("notes.txt"), b"mine");
    // Found when the session is put in place, at its first record, which is refused.
    let mut session = store.open_or_create(&id("y")).unwrap();
    let err = session.append(note()).unwrap_err().to_string();
    assert!(matches!(
        session.append(note()),
        Err(StoreError::Poisoned(_))
    ));
    drop(session);
    assert!(
        err.contains(&sessions.join("y").display().to_string()),
        "{err}"
    );
    assert!(err.contains("no log"), "{err}");
    assert!(err.contains("move it away"), "{err}");
    assert_eq!(
        std::fs::read(sessions.join("y").join("notes.txt")).unwrap(),
        b"mine"
    );
}

#[test]
fn a_session_being_made_is_never_listed_nor_read() {
    let (_state, store, sessions) = store();
    write(
        &sessions.join(".creating-z.4242").join(LOG_FILE),
        TORN_HEADER,
    );
    assert!(store.list().unwrap().is_empty());
    let session = store.create(&id("z")).unwrap();
    assert!(matches!(session.records(), [LogRecord::Header { .. }]));
}

#[test]
fn stale_temporary_files_and_half_made_sessions_are_removed_at_start() {
    let (_state, store, sessions) = store();
    drop(made(&store, "w"));
    let w = sessions.join("w");
    let stale = [
        sessions.join("x").join("log.tmp.4242"),
        w.join("baseline-1.tmp.4242"),
        w.join("outputs").join("out-3.json.tmp.4242"),
        sessions.join(".creating-z.4242").join(LOG_FILE),
    ];
    for path in &stale {
        write(path, TORN_HEADER);
    }
    let kept = [
        w.join("notes.tmp.txt"),
        w.join("outputs").join("out-2.json"),
        sessions.join("not a session id").join("log.tmp.1"),
    ];
    for path in &kept {
        write(path, b"kept");
    }

    let removed = store.remove_stale();
    for path in &stale {
        assert!(!path.exists(), "{} is still there", path.display());
    }
    assert!(
        !sessions.join("x").exists(),
        "the empty leftover directory too"
    );
    assert!(!sessions.join(".creating-z.4242").exists());
    for path in &kept {
        assert!(path.exists(), "{} was removed", path.display());
    }
    assert_eq!(removed.len(), 5, "{removed:?}");
    // The session beside them is whole.
    assert_eq!(store.open(&id("w")).unwrap().records().len(), 2);
}
