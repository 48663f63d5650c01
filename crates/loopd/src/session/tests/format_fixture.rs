#![allow(clippy::unwrap_used, clippy::expect_used)]
//! On-disk format compatibility: a session written by each log format version is kept as a
//! fixture, and the current loopd must open it: format 1 (session log
//! `bxcore::LOG_FORMAT_VERSION` 1, baseline `BASELINE_FORMAT_VERSION` 1, the baseline in a
//! file) under `tests/fixtures/v1-session/`, format 2 (the baseline in the log) under
//! `v2-session/`. A change of format must keep reading these fixtures (or convert them); a
//! fixture is never regenerated after a format change. `write_v2_fixture` (ignored) is how
//! the newest was made: `BOXMAKER_WRITE_FIXTURE=1 cargo test -p loopd --lib format_fixture --
//! --ignored` (v1-session was made the same way by format 1's code).

use crate::session::{Baseline, LOG_FILE, Store};
use bxcore::{
    CallId, DataClass, LogRecord, SessionId, Timestamp, ToolCall, ToolOutcome, TurnEnd, Usage,
};
use std::path::{Path, PathBuf};

const SESSION: &str = "main";
const TIME: &str = "2026-11-29T22:51:03Z";

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1-session")
}

fn time() -> Timestamp {
    Timestamp::parse(TIME).unwrap()
}

/// The records of the fixture's one turn: a user message, a tool call, its result, an answer.
fn v1_turn() -> Vec<LogRecord> {
    let time = time();
    vec![
        LogRecord::User {
            time,
            turn: 1,
            content: "What time is it? — ünïcödé".into(),
            task_id: None,
        },
        LogRecord::Assistant {
            time,
            content: String::new(),
            reasoning: Some("let me look".into()),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "clock".into(),
                arguments: "{}".into(),
            }],
            usage: Some(Usage {
                prompt_tokens: 120,
                completion_tokens: 7,
                cached_tokens: 100,
            }),
        },
        LogRecord::ToolResult {
            time,
            call: CallId(1),
            tool_call_id: "c1".into(),
            content: TIME.into(),
            class: DataClass::Public,
            untrusted: false,
            truncated: false,
            outcome: ToolOutcome::Ok,
            by_loopd: false,
        },
        LogRecord::Assistant {
            time,
            content: "It is 22:51 UTC.".into(),
            reasoning: None,
            tool_calls: vec![],
            usage: None,
        },
        LogRecord::TurnEnd {
            time,
            turn: 1,
            end: TurnEnd::Done,
        },
    ]
}

fn v1_baseline() -> Baseline {
    Baseline {
        version: 1,
        epoch: 0,
        time: time(),
        system: "You are a helpful assistant.".into(),
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

/// Copies the fixture into a fresh state directory, as a restored backup would be.
fn state_with_fixture() -> tempfile::TempDir {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("sessions").join(SESSION);
    std::fs::create_dir_all(&dir).unwrap();
    for name in [LOG_FILE, "baseline-0.json"] {
        std::fs::copy(fixture_dir().join(name), dir.join(name)).unwrap();
    }
    state
}

#[test]
fn the_v1_fixture_is_version_1() {
    let log = std::fs::read_to_string(fixture_dir().join(LOG_FILE)).unwrap();
    let header = log.lines().next().unwrap();
    assert!(header.contains(r#""version":1"#), "{header}");
    let baseline = std::fs::read_to_string(fixture_dir().join("baseline-0.json")).unwrap();
    assert!(baseline.contains(r#""version": 1"#), "{baseline}");
}

#[test]
fn the_current_loopd_reads_a_v1_session() {
    let state = state_with_fixture();
    let store = Store::new(state.path()).unwrap();
    let id = SessionId::new(SESSION).unwrap();
    assert_eq!(store.list().unwrap(), vec![id.clone()]);

    // Read without holding it: the header then the turn, unchanged.
    let records = store.read(&id).unwrap();
    assert!(
        matches!(records.first(), Some(LogRecord::Header { version: 1, .. })),
        "{:?}",
        records.first()
    );
    assert_eq!(&records[1..], v1_turn().as_slice());

    // Open it for appending: recovered as is, its baseline read, a new turn appended on top.
    let mut session = store.open(&id).unwrap();
    assert_eq!(session.records(), records.as_slice());
    assert_eq!(session.last_turn(), 1);
    assert_eq!(session.open_turn(), None);
    assert_eq!(session.epoch(), 0);
    assert_eq!(session.next_call(), CallId(2));
    assert_eq!(session.baseline(0).unwrap(), Some(v1_baseline()));
    session
        .append(LogRecord::User {
            time: Timestamp::now(),
            turn: 2,
            content: "and now?".into(),
            task_id: None,
        })
        .unwrap();
    drop(session);
    let reopened = store.open(&id).unwrap();
    assert_eq!(
        reopened.records().len(),
        records.len() + 2,
        "interrupted turn 2"
    );
    assert_eq!(reopened.last_turn(), 2);
}

#[test]
fn a_v1_session_keeps_its_baselines_in_files() {
    // An older loopd reads a format-1 log: loopd never writes a record it does not know there.
    let state = state_with_fixture();
    let store = Store::new(state.path()).unwrap();
    let mut session = store.open(&SessionId::new(SESSION).unwrap()).unwrap();
    let refused = session.append(LogRecord::Baseline {
        epoch: 0,
        baseline: serde_json::to_value(v1_baseline()).unwrap(),
    });
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("keeps its baselines in files")
    );
    session
        .append(LogRecord::EpochStart {
            time: time(),
            epoch: 1,
            carry: "the time was asked".into(),
            class: DataClass::Public,
            untrusted: false,
        })
        .unwrap();
    let next = Baseline {
        epoch: 1,
        ..v1_baseline()
    };
    session.write_baseline(next.clone()).unwrap();
    assert!(session.dir().join("baseline-1.json").is_file());
    assert!(
        !session
            .records()
            .iter()
            .any(|r| matches!(r, LogRecord::Baseline { .. }))
    );
    drop(session);
    let reopened = store.open(&SessionId::new(SESSION).unwrap()).unwrap();
    assert_eq!(reopened.current_baseline(), Some(&next));
    assert_eq!(reopened.baseline(0).unwrap(), Some(v1_baseline()));
}

fn v2_fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v2-session")
}

/// The v2 fixture's baseline: v1's, written in the log.
fn v2_baseline() -> Baseline {
    v1_baseline()
}

#[test]
fn the_current_loopd_reads_a_v2_session() {
    let log = std::fs::read_to_string(v2_fixture_dir().join(LOG_FILE)).unwrap();
    assert!(log.lines().next().unwrap().contains(r#""version":2"#));
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("sessions").join(SESSION);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(v2_fixture_dir().join(LOG_FILE), dir.join(LOG_FILE)).unwrap();
    let store = Store::new(state.path()).unwrap();
    let id = SessionId::new(SESSION).unwrap();
    let records = store.read(&id).unwrap();
    let kinds: Vec<&str> = records.iter().map(LogRecord::kind).collect();
    assert_eq!(
        kinds,
        [
            "header",
            "user",
            "baseline",
            "assistant",
            "tool_result",
            "assistant",
            "turn_end"
        ]
    );
    let session = store.open(&id).unwrap();
    assert_eq!(session.current_baseline(), Some(&v2_baseline()));
    assert_eq!(session.baseline(0).unwrap(), Some(v2_baseline()));
    assert_eq!(session.last_turn(), 1);
}

/// Writes the fixture of the current format with the current code, into a new directory
/// named for the version. Run only when a format version is new; never to overwrite a
/// fixture (v1-session was written by format 1, v2-session by format 2).
#[test]
#[ignore = "writes the fixture; run by hand with BOXMAKER_WRITE_FIXTURE=1"]
fn write_v2_fixture() {
    if std::env::var_os("BOXMAKER_WRITE_FIXTURE").is_none() {
        return;
    }
    assert_eq!(bxcore::LOG_FORMAT_VERSION, 2);
    assert_eq!(crate::session::BASELINE_FORMAT_VERSION, 1);
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let mut session = store.create(&SessionId::new(SESSION).unwrap()).unwrap();
    let mut turn = v1_turn().into_iter();
    session.append(turn.next().unwrap()).unwrap();
    session.write_baseline(v2_baseline()).unwrap();
    for record in turn {
        session.append(record).unwrap();
    }
    let out = v2_fixture_dir();
    assert!(!out.exists(), "{} exists: never overwritten", out.display());
    std::fs::create_dir_all(&out).unwrap();
    std::fs::copy(session.dir().join(LOG_FILE), out.join(LOG_FILE)).unwrap();
}
