#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Approvals in the session log (issue 16): their records belong inside a turn, and an
//! approval a turn still waited for when loopd stopped is recorded void on the next open,
//! before the turn is ended as interrupted.

use crate::session::{Store, StoreError};
use bxcore::{ApprovalDecision, ApprovalId, CallId, DataClass, LogRecord, SessionId, Timestamp};

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

fn requested(call: u64, approval: &str) -> LogRecord {
    LogRecord::ApprovalRequested {
        time: Timestamp::now(),
        call: CallId(call),
        approval: ApprovalId::new(approval).unwrap(),
        tool: "write_file".into(),
        arguments: r#"{"path":"a.txt","content":"hi"}"#.into(),
        reason: "write_file asks the owner first".into(),
        class: DataClass::Public,
        untrusted: false,
        timeout_ms: 600_000,
    }
}

fn decided(call: u64, approval: &str, decision: ApprovalDecision) -> LogRecord {
    LogRecord::ApprovalDecided {
        time: Timestamp::now(),
        call: CallId(call),
        approval: ApprovalId::new(approval).unwrap(),
        decision,
        uid: Some(1000),
        reason: None,
    }
}

/// The records after the header, as (kind, decision, reason) for approval decisions.
fn tail(records: &[LogRecord]) -> Vec<String> {
    records[1..]
        .iter()
        .map(|r| match r {
            LogRecord::ApprovalDecided {
                approval,
                decision,
                uid,
                reason,
                ..
            } => format!("decided {approval} {decision} {uid:?} {reason:?}"),
            LogRecord::TurnEnd { end, .. } => format!("turn_end {end:?}"),
            other => other.kind().to_string(),
        })
        .collect()
}

#[test]
fn an_approval_left_waiting_is_recorded_void_before_the_turn_ends_interrupted() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    {
        let mut session = store.create(&id("s")).unwrap();
        session.append(user(1)).unwrap();
        // One approval answered, one still waiting when loopd was killed.
        session.append(requested(1, "ap-1")).unwrap();
        session
            .append(decided(1, "ap-1", ApprovalDecision::Denied))
            .unwrap();
        session.append(requested(2, "ap-2")).unwrap();
    }
    let session = store.open(&id("s")).unwrap();
    assert_eq!(session.open_turn(), None);
    let expected = [
        "user".to_string(),
        "approval_requested".into(),
        "decided ap-1 denied Some(1000) None".into(),
        "approval_requested".into(),
        "decided ap-2 void None Some(\"loopd stopped while the call waited\")".into(),
        "turn_end Interrupted".into(),
    ];
    assert_eq!(tail(session.records()), expected);
    // Opened again, nothing more is written: the turn is ended and the approval decided.
    drop(session);
    assert_eq!(tail(store.open(&id("s")).unwrap().records()), expected);
}

#[test]
fn approval_records_outside_a_turn_or_for_an_approval_never_asked_are_refused() {
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let mut session = store.create(&id("s")).unwrap();
    for record in [
        requested(1, "ap-1"),
        decided(1, "ap-1", ApprovalDecision::Approved),
    ] {
        let kind = record.kind();
        match session.append(record) {
            Err(StoreError::BadRecord { why, .. }) => {
                assert!(why.contains("no turn is open"), "{kind}: {why}")
            }
            other => panic!("{kind}: {other:?}"),
        }
    }
    session.append(user(1)).unwrap();
    match session.append(decided(1, "ap-9", ApprovalDecision::Approved)) {
        Err(StoreError::BadRecord { why, .. }) => {
            assert!(why.contains("ap-9 was not asked"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    session.append(requested(1, "ap-1")).unwrap();
    // A second decision of the same approval (brokerd refused the approval after it was
    // approved) is in place.
    session
        .append(decided(1, "ap-1", ApprovalDecision::Approved))
        .unwrap();
    session
        .append(decided(1, "ap-1", ApprovalDecision::Void))
        .unwrap();
    assert_eq!(session.records().len(), 5);
}

fn answer_calling(ids: &[&str]) -> LogRecord {
    LogRecord::Assistant {
        time: Timestamp::now(),
        content: String::new(),
        reasoning: None,
        tool_calls: ids
            .iter()
            .map(|id| bxcore::ToolCall {
                id: (*id).into(),
                name: "call_tool".into(),
                arguments: "{}".into(),
            })
            .collect(),
        usage: None,
    }
}

fn result(call: u64, tool_call_id: &str) -> LogRecord {
    LogRecord::ToolResult {
        time: Timestamp::now(),
        call: CallId(call),
        tool_call_id: tool_call_id.into(),
        content: "ran".into(),
        class: DataClass::Public,
        untrusted: false,
        truncated: false,
        outcome: bxcore::ToolOutcome::Ok,
        by_loopd: false,
    }
}

#[test]
fn an_approved_call_whose_result_never_came_is_recorded_as_maybe_not_run_before_the_turn_ends() {
    use crate::session::{APPROVED_WITHOUT_RESULT, LeftAs, left_unfinished};
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    {
        let mut session = store.create(&id("s")).unwrap();
        session.append(user(1)).unwrap();
        session
            .append(answer_calling(&["tc-1", "tc-2", "tc-3"]))
            .unwrap();
        // Call 1 was approved and ran; call 2 was approved and loopd was killed before its
        // result came back; nothing of call 3 was begun.
        session.append(requested(1, "ap-1")).unwrap();
        session
            .append(decided(1, "ap-1", ApprovalDecision::Approved))
            .unwrap();
        session.append(result(1, "tc-1")).unwrap();
        session.append(requested(2, "ap-2")).unwrap();
        session
            .append(decided(2, "ap-2", ApprovalDecision::Approved))
            .unwrap();
    }
    let left = left_unfinished(&store.read(&id("s")).unwrap());
    let left: Vec<(String, u64, LeftAs)> = left
        .into_iter()
        .map(|l| (l.approval.to_string(), l.turn, l.left))
        .collect();
    assert_eq!(
        left,
        [("ap-2".to_string(), 1, LeftAs::ApprovedWithoutResult)]
    );

    let session = store.open(&id("s")).unwrap();
    assert_eq!(session.open_turn(), None);
    let records = session.records();
    let n = records.len();
    match &records[n - 2] {
        LogRecord::ToolResult {
            call,
            tool_call_id,
            content,
            outcome,
            by_loopd,
            ..
        } => {
            assert_eq!(*call, CallId(2));
            assert_eq!(tool_call_id, "tc-2");
            assert_eq!(content, APPROVED_WITHOUT_RESULT);
            assert_eq!(*outcome, bxcore::ToolOutcome::Failed);
            assert!(!by_loopd, "it may have reached brokerd");
        }
        other => panic!("expected the call's result, got {other:?}"),
    }
    assert_eq!(tail(records).last().unwrap(), "turn_end Interrupted");
    // Ended: opened again, nothing more is written, and nothing is left to tell.
    drop(session);
    let again = store.open(&id("s")).unwrap();
    assert_eq!(again.records().len(), n);
    assert!(left_unfinished(again.records()).is_empty());
}

#[test]
fn what_a_stop_left_waiting_is_told_apart_from_what_was_decided() {
    use crate::session::{LeftAs, left_unfinished};
    let records = vec![
        LogRecord::Header {
            version: bxcore::LOG_FORMAT_VERSION,
            session: id("s"),
            time: Timestamp::now(),
        },
        user(1),
        answer_calling(&["tc-1", "tc-2", "tc-3"]),
        // Denied: nothing to tell.
        requested(1, "ap-1"),
        decided(1, "ap-1", ApprovalDecision::Denied),
        result(1, "tc-1"),
        // Approved, then refused by brokerd: it did not run, and its result says so.
        requested(2, "ap-2"),
        decided(2, "ap-2", ApprovalDecision::Approved),
        decided(2, "ap-2", ApprovalDecision::Void),
        // Still waiting.
        requested(3, "ap-3"),
    ];
    let left: Vec<(String, LeftAs)> = left_unfinished(&records)
        .into_iter()
        .map(|l| (l.approval.to_string(), l.left))
        .collect();
    assert_eq!(left, [("ap-3".to_string(), LeftAs::Waiting)]);
    let mut ended = records.clone();
    ended.push(LogRecord::TurnEnd {
        time: Timestamp::now(),
        turn: 1,
        end: bxcore::TurnEnd::Done,
    });
    assert!(left_unfinished(&ended).is_empty());
}
