#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `SessionId` accepts exactly `[A-Za-z0-9._-]{1,64}` not starting with `.`.

use bxcore::{CallId, SESSION_ID_MAX_BYTES, SessionId, TASK_ID_MAX_BYTES, TaskId};
use proptest::prelude::*;

fn allowed(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= SESSION_ID_MAX_BYTES
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[test]
fn the_64_byte_edge() {
    let at_limit = "a".repeat(64);
    assert_eq!(SessionId::new(&at_limit).unwrap().as_str(), at_limit);
    let over = "a".repeat(65);
    let err = SessionId::new(&over).unwrap_err();
    assert!(err.to_string().contains("65 bytes"), "{err}");
}

#[test]
fn a_subagent_child_of_a_59_byte_parent_is_refused() {
    let raw = format!("sub-{}-1", "a".repeat(59));
    assert_eq!(raw.len(), 65);
    assert!(SessionId::new(&raw).is_err());
    assert!(SessionId::new(&format!("sub-{}-1", "a".repeat(58))).is_ok());
}

#[test]
fn refusals_say_what_was_wrong() {
    let empty = SessionId::new("").unwrap_err().to_string();
    assert!(
        empty.contains("session id") && empty.contains("empty"),
        "{empty}"
    );
    let dot = SessionId::new(".hidden").unwrap_err().to_string();
    assert!(dot.contains("starts with '.'"), "{dot}");
    let slash = SessionId::new("a/b").unwrap_err().to_string();
    assert!(slash.contains("'/'"), "{slash}");
    assert!(SessionId::new("..").is_err());
    assert!(SessionId::new("a b").is_err());
    assert!(SessionId::new("é").is_err());
}

#[test]
fn serde_validates() {
    let id: SessionId = serde_json::from_str("\"mm-thread\"").unwrap();
    assert_eq!(id.as_str(), "mm-thread");
    assert_eq!(serde_json::to_string(&id).unwrap(), "\"mm-thread\"");
    let err = serde_json::from_str::<SessionId>("\"../etc\"").unwrap_err();
    assert!(err.to_string().contains("session id"), "{err}");
    assert_eq!(serde_json::to_string(&CallId(7)).unwrap(), "7");
    assert_eq!(
        "x.y_z-1".parse::<SessionId>().unwrap().to_string(),
        "x.y_z-1"
    );
}

proptest! {
    #[test]
    fn accepts_exactly_the_allowed_set(s in "[A-Za-z0-9._\\-/ é\\x00]{0,70}") {
        prop_assert_eq!(SessionId::new(&s).is_ok(), allowed(&s));
    }

    #[test]
    fn every_allowed_id_round_trips(s in "[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}") {
        let id = SessionId::new(&s).unwrap();
        prop_assert_eq!(id.as_str(), s.as_str());
        let back: SessionId = serde_json::from_str(&serde_json::to_string(&id).unwrap()).unwrap();
        prop_assert_eq!(back, id);
    }
}

#[test]
fn task_ids_follow_the_session_id_rules_up_to_48_bytes() {
    let at_limit = "t".repeat(TASK_ID_MAX_BYTES);
    assert_eq!(TaskId::new(&at_limit).unwrap().as_str(), at_limit);
    // So that the session of a task without one, task-<id>, is a session id.
    assert!(SessionId::new(&format!("task-{at_limit}")).is_ok());
    let over = TaskId::new(&"t".repeat(TASK_ID_MAX_BYTES + 1))
        .unwrap_err()
        .to_string();
    assert!(
        over.contains("task id") && over.contains("the limit is 48"),
        "{over}"
    );
    let empty = TaskId::new("").unwrap_err().to_string();
    assert!(
        empty.contains("use 1 to 48 of A-Z a-z 0-9 . _ -"),
        "{empty}"
    );
    assert!(TaskId::new("a/b").is_err());
    assert!(TaskId::new(".x").is_err());
    let id: TaskId = serde_json::from_str("\"1764529200-9f3c2a1b\"").unwrap();
    assert_eq!(id.to_string(), "1764529200-9f3c2a1b");
    let err = serde_json::from_str::<TaskId>("\"a b\"").unwrap_err();
    assert!(err.to_string().contains("task id"), "{err}");
}
