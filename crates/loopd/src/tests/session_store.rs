#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The session store: durable appends, crash recovery at every byte, integrity, holds.

use crate::session::{Baseline, LOG_FILE, Store, StoreError};
use bxcore::{
    CallId, DataClass, LogRecord, SessionId, Timestamp, ToolCall, ToolOutcome, TurnEnd, Usage,
};
use std::path::Path;

fn id(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

/// A turn of a user message, a tool call, its result and an answer.
fn turn(n: u64) -> Vec<LogRecord> {
    let time = Timestamp::now();
    vec![
        LogRecord::User {
            time,
            turn: n,
            content: format!("question {n} — with ünïcödé"),
            task_id: None,
        },
        LogRecord::Assistant {
            time,
            content: String::new(),
            reasoning: Some("let me look".into()),
            tool_calls: vec![ToolCall {
                id: format!("c{n}"),
                name: "clock".into(),
                arguments: "{}".into(),
            }],
            usage: Some(Usage {
                prompt_tokens: 100 * n,
                completion_tokens: 7,
                cached_tokens: 90 * n,
            }),
        },
        LogRecord::ToolResult {
            time,
            call: CallId(n),
            tool_call_id: format!("c{n}"),
            content: "2026-11-29T22:51:03Z".into(),
            class: DataClass::Public,
            untrusted: false,
            truncated: false,
            outcome: ToolOutcome::Ok,
            by_loopd: false,
        },
        LogRecord::Assistant {
            time,
            content: format!("answer {n}"),
            reasoning: None,
            tool_calls: vec![],
            usage: None,
        },
        LogRecord::TurnEnd {
            time,
            turn: n,
            end: TurnEnd::Done,
        },
    ]
}

fn store_with_turns(dir: &Path, name: &str, turns: u64) -> Vec<LogRecord> {
    let store = Store::new(dir).unwrap();
    let mut session = store.create(&id(name)).unwrap();
    for n in 1..=turns {
        for record in turn(n) {
            session.append(record).unwrap();
        }
    }
    session.records().to_vec()
}

fn log_path(state: &Path, name: &str) -> std::path::PathBuf {
    state.join("sessions").join(name).join(LOG_FILE)
}

#[test]
fn appended_records_are_there_after_reopen() {
    let state = tempfile::tempdir().unwrap();
    let written = store_with_turns(state.path(), "main", 3);
    assert_eq!(written.len(), 1 + 3 * 5);
    let store = Store::new(state.path()).unwrap();
    let session = store.open(&id("main")).unwrap();
    assert_eq!(session.records(), written.as_slice());
    assert_eq!(session.last_turn(), 3);
    assert_eq!(session.open_turn(), None);
    assert_eq!(session.next_call(), CallId(4));
    assert_eq!(store.read(&id("main")).unwrap(), written);
    assert!(matches!(session.records()[0], LogRecord::Header { .. }));
}

#[test]
fn a_crash_at_any_byte_of_the_last_record_loses_nothing_before_it() {
    let state = tempfile::tempdir().unwrap();
    let written = store_with_turns(state.path(), "crash", 3);
    let bytes = std::fs::read(log_path(state.path(), "crash")).unwrap();
    let last_start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|b| *b == b'\n')
        .unwrap()
        + 1;
    let earlier = &written[..written.len() - 1];
    for cut in last_start..bytes.len() {
        let copy = tempfile::tempdir().unwrap();
        let path = log_path(copy.path(), "crash");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &bytes[..cut]).unwrap();

        let store = Store::new(copy.path()).unwrap();
        let session = store.open(&id("crash")).unwrap();
        let records = session.records();
        assert_eq!(&records[..earlier.len()], earlier, "cut at byte {cut}");
        // The last turn lost its end, so it was ended as interrupted.
        assert!(
            matches!(
                records.last(),
                Some(LogRecord::TurnEnd {
                    turn: 3,
                    end: TurnEnd::Interrupted,
                    ..
                })
            ),
            "cut at byte {cut}: {:?}",
            records.last()
        );
        assert_eq!(records.len(), written.len(), "cut at byte {cut}");
        drop(session);
        // The repaired log reopens cleanly and unchanged.
        let again = store.open(&id("crash")).unwrap();
        assert_eq!(again.records().len(), written.len(), "cut at byte {cut}");
    }
}

#[test]
fn an_unfinished_turn_is_ended_as_interrupted_once() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    {
        let mut session = store.create(&id("s")).unwrap();
        session.append(turn(1).remove(0)).unwrap();
        assert_eq!(session.open_turn(), Some(1));
    }
    let session = store.open(&id("s")).unwrap();
    assert_eq!(session.open_turn(), None);
    let ends = |records: &[LogRecord]| {
        records
            .iter()
            .filter(|r| {
                matches!(
                    r,
                    LogRecord::TurnEnd {
                        end: TurnEnd::Interrupted,
                        ..
                    }
                )
            })
            .count()
    };
    assert_eq!(ends(session.records()), 1);
    drop(session);
    assert_eq!(ends(store.open(&id("s")).unwrap().records()), 1);
}

#[test]
fn a_crash_after_an_answer_synced_with_its_end_ends_the_turn_interrupted() {
    // The answer is written without its own fdatasync (its turn_end syncs both); a process
    // killed between the two leaves the answer, no end: open ends the turn, once, and the
    // session takes the next task.
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    {
        let mut session = store.create(&id("s")).unwrap();
        session.append(turn(1).remove(0)).unwrap();
        let answer = LogRecord::Assistant {
            time: Timestamp::now(),
            content: "the answer".into(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: None,
        };
        session.append_synced_with_next(answer).unwrap();
    }
    let mut session = store.open(&id("s")).unwrap();
    let records = session.records();
    let n = records.len();
    assert!(
        matches!(&records[n - 2], LogRecord::Assistant { content, .. } if content == "the answer"),
        "{records:?}"
    );
    assert!(matches!(
        records[n - 1],
        LogRecord::TurnEnd {
            end: TurnEnd::Interrupted,
            ..
        }
    ));
    assert_eq!(session.open_turn(), None);
    session.append(turn(2).remove(0)).unwrap();
    assert_eq!(session.open_turn(), Some(2));
}

/// Rewrites line `n` (from 1) of a log with `change`, returns the file's new bytes.
fn edit_lines(path: &Path, change: impl FnOnce(&mut Vec<String>)) -> Vec<u8> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    change(&mut lines);
    let out = lines.join("\n") + "\n";
    std::fs::write(path, &out).unwrap();
    out.into_bytes()
}

fn expect_corrupt(state: &Path, name: &str, line: u64, words: &str) {
    let path = log_path(state, name);
    let before = std::fs::read(&path).unwrap();
    let store = Store::new(state).unwrap();
    let err = store.open(&id(name)).unwrap_err();
    match &err {
        StoreError::Corrupt {
            path: p,
            line: l,
            why,
        } => {
            assert_eq!(p, &path);
            assert_eq!(*l, line, "{err}");
            assert!(why.contains(words), "{err}");
        }
        other => panic!("expected a corrupt-log error, got {other}"),
    }
    let shown = err.to_string();
    assert!(
        shown.contains(LOG_FILE) && shown.contains(&format!("line {line}")),
        "{shown}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the log was rewritten"
    );
    assert!(store.read(&id(name)).is_err());
}

#[test]
fn a_changed_record_is_found_and_named() {
    let state = tempfile::tempdir().unwrap();
    store_with_turns(state.path(), "s", 2);
    edit_lines(&log_path(state.path(), "s"), |lines| {
        lines[2] = lines[2].replace("let me look", "let me leak");
    });
    expect_corrupt(state.path(), "s", 3, "digest does not match");
}

#[test]
fn reordered_and_dropped_records_are_found_and_named() {
    let state = tempfile::tempdir().unwrap();
    store_with_turns(state.path(), "swap", 2);
    edit_lines(&log_path(state.path(), "swap"), |lines| lines.swap(4, 5));
    expect_corrupt(state.path(), "swap", 5, "sequence number 6");

    store_with_turns(state.path(), "drop", 2);
    edit_lines(&log_path(state.path(), "drop"), |lines| {
        lines.remove(2);
    });
    expect_corrupt(state.path(), "drop", 3, "sequence number 4");
}

#[test]
fn a_bad_line_in_the_middle_is_an_error_naming_file_and_line() {
    let state = tempfile::tempdir().unwrap();
    store_with_turns(state.path(), "s", 2);
    edit_lines(&log_path(state.path(), "s"), |lines| {
        lines[6] = "{\"type\":\"garbage".into();
    });
    expect_corrupt(state.path(), "s", 7, "no digest");
}

#[test]
fn one_open_session_per_id() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let session = made(&store, "s");
    assert!(store.is_held(&id("s")));
    assert!(matches!(store.open(&id("s")), Err(StoreError::Busy(_))));
    // A second store (as another process would be) is kept out by the file lock.
    let other = Store::new(state.path()).unwrap();
    let err = other.open(&id("s")).unwrap_err();
    assert!(matches!(err, StoreError::Busy(_)), "{err}");
    assert!(err.to_string().contains("busy"));
    drop(session);
    assert!(!store.is_held(&id("s")));
    assert!(store.open(&id("s")).is_ok());
}

#[test]
fn create_open_and_list() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    assert!(matches!(
        store.open(&id("nope")),
        Err(StoreError::NotFound(_))
    ));
    drop(made(&store, "b"));
    let mut a = store.open_or_create(&id("a")).unwrap();
    a.append(note()).unwrap();
    drop(a);
    assert!(matches!(store.create(&id("a")), Err(StoreError::Exists(_))));
    std::fs::create_dir(state.path().join("sessions/.junk")).unwrap();
    std::fs::create_dir(state.path().join("sessions/empty")).unwrap();
    assert_eq!(store.list().unwrap(), vec![id("a"), id("b")]);
}

#[test]
fn records_out_of_place_are_refused_and_nothing_is_written() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let mut session = store.create(&id("s")).unwrap();
    let time = Timestamp::now();
    let header = LogRecord::Header {
        version: 1,
        session: id("s"),
        time,
    };
    let end = |turn| LogRecord::TurnEnd {
        time,
        turn,
        end: TurnEnd::Done,
    };
    let user = |turn| LogRecord::User {
        time,
        turn,
        content: "x".into(),
        task_id: None,
    };
    assert!(matches!(
        session.append(header),
        Err(StoreError::BadRecord { .. })
    ));
    assert!(session.append(end(1)).is_err());
    session.append(user(1)).unwrap();
    let err = session.append(user(2)).unwrap_err();
    assert!(err.to_string().contains("turn 1 is still open"), "{err}");
    assert!(session.append(end(2)).is_err());
    session.append(end(1)).unwrap();
    assert!(session.append(user(1)).is_err());
    let epoch = |epoch| LogRecord::EpochStart {
        time,
        epoch,
        carry: "c".into(),
        class: DataClass::Private,
        untrusted: true,
    };
    assert!(session.append(epoch(2)).is_err());
    session.append(epoch(1)).unwrap();
    assert_eq!(session.epoch(), 1);
    assert_eq!(session.carry().unwrap().1.class, DataClass::Private);
    assert_eq!(session.epoch_records().len(), 1);
    let len = session.records().len();
    drop(session);
    assert_eq!(store.open(&id("s")).unwrap().records().len(), len);
}

fn note() -> LogRecord {
    LogRecord::Note {
        time: Timestamp::now(),
        text: "made".into(),
    }
}

/// Session `name` made in `store` (by its first record, a note).
fn made(store: &Store, name: &str) -> crate::session::Session {
    let mut session = store.create(&id(name)).unwrap();
    session.append(note()).unwrap();
    session
}

fn baseline(epoch: u32, system: &str) -> Baseline {
    Baseline {
        version: crate::session::BASELINE_FORMAT_VERSION,
        epoch,
        time: Timestamp::now(),
        system: system.into(),
        memory: String::new(),
        memory_labels: bxcore::Labels::PUBLIC,
        tools_labels: bxcore::Labels::PUBLIC,
        tools: vec![proto::ToolSchema {
            name: "clock".into(),
            description: "The current date and time, as RFC 3339 in UTC.".into(),
            parameters: serde_json::json!({"type":"object","properties":{}}),
        }],
    }
}

#[test]
fn a_baseline_is_written_once() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let mut session = made(&store, "s");
    assert_eq!(session.baseline(0).unwrap(), None);
    assert_eq!(session.current_baseline(), None);
    let first = baseline(0, "You are helpful.");
    session.write_baseline(first.clone()).unwrap();
    let err = session.write_baseline(baseline(0, "changed")).unwrap_err();
    assert!(
        matches!(err, StoreError::BaselineExists { epoch: 0, .. }),
        "{err}"
    );
    assert_eq!(session.baseline(0).unwrap(), Some(first.clone()));
    assert_eq!(session.current_baseline(), Some(&first));
    assert!(session.write_baseline(baseline(3, "x")).is_err());
    let leftovers: Vec<_> = std::fs::read_dir(session.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    drop(session);
    let reopened = store.open(&id("s")).unwrap();
    assert_eq!(reopened.current_baseline(), Some(&first));
}

#[test]
fn many_sessions_appended_concurrently() {
    const SESSIONS: usize = 24;
    const TURNS: u64 = 6;
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    std::thread::scope(|scope| {
        for n in 0..SESSIONS {
            let store = store.clone();
            scope.spawn(move || {
                let mut session = store.create(&id(&format!("s{n}"))).unwrap();
                for t in 1..=TURNS {
                    for record in turn(t) {
                        session.append(record).unwrap();
                    }
                }
            });
        }
    });
    let ids = store.list().unwrap();
    assert_eq!(ids.len(), SESSIONS);
    for id in ids {
        let session = store.open(&id).unwrap();
        assert_eq!(session.records().len() as u64, 1 + TURNS * 5, "{id}");
        assert_eq!(session.last_turn(), TURNS);
    }
}

#[test]
fn an_inherited_label_stays_under_the_context_in_every_epoch_and_after_reopen() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let mut child = store.create(&id("sub-p-1")).unwrap();
    let time = Timestamp::now();
    child
        .append(LogRecord::Inherited {
            time,
            parent: id("p"),
            class: DataClass::Private,
            untrusted: true,
            root_session: id("p"),
            root_turn: 3,
        })
        .unwrap();
    // A new epoch whose carry claims to be public: what the session inherited stays.
    child
        .append(LogRecord::EpochStart {
            time,
            epoch: 1,
            carry: "nothing to see".into(),
            class: DataClass::Public,
            untrusted: false,
        })
        .unwrap();
    let expected = bxcore::Labels::new(DataClass::Private, true);
    assert_eq!(crate::baseline::context_labels(&child), expected);
    drop(child);
    let child = store.open(&id("sub-p-1")).unwrap();
    assert_eq!(child.inherited(), expected);
    assert_eq!(crate::baseline::context_labels(&child), expected);
    assert_eq!(child.root_turn(), Some((&id("p"), 3)));
}
