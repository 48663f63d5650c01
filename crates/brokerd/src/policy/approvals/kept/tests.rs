//! The pending approvals kept in the state dir (issue 33): a restarted brokerd accepts an
//! approval it minted before, once; an expired one, one "from the future" and a damaged file
//! are refused; a mint or a use that cannot be written runs nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::super::{ApprovalTable, MintError, Refusal};
use super::{APPROVALS_FILE, Kept, KeptApproval, unix_ms_now};
use crate::config::ApprovalSettings;
use bxcore::{ApprovalId, CallId, Labels, SessionId};
use proto::ToolRequest;
use std::time::Instant;

/// Long enough that no test outlives it.
const EXPIRE_MS: u64 = 600_000;

fn settings() -> ApprovalSettings {
    ApprovalSettings {
        expire_ms: EXPIRE_MS,
        max_pending: 64,
    }
}

fn request(arguments: &str) -> ToolRequest {
    ToolRequest {
        session: SessionId::new("main").unwrap(),
        turn: 1,
        call: CallId(1),
        tool: "write_file".to_string(),
        arguments: arguments.to_string(),
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    }
}

const ARGS: &str = r#"{"path":"/a","content":"x"}"#;

#[test]
fn a_pending_approval_survives_a_restart_and_is_used_once() {
    let state = tempfile::tempdir().unwrap();
    let r = request(ARGS);
    let id = {
        let mut before = ApprovalTable::kept_in(&settings(), state.path());
        before.mint(&r, Instant::now()).unwrap()
    };
    // A restarted brokerd: the approval is pending, bound as before.
    let mut after = ApprovalTable::kept_in(&settings(), state.path());
    assert_eq!(after.pending(), 1);
    assert_eq!(
        after.consume(
            &id,
            &request(r#"{"path":"/b","content":"x"}"#),
            Instant::now()
        ),
        Err(Refusal::OtherArguments(id.clone()))
    );
    after.consume(&id, &r, Instant::now()).unwrap();
    // Used: off the disk before the call ran, so no later start finds it again.
    let mut again = ApprovalTable::kept_in(&settings(), state.path());
    assert_eq!(again.pending(), 0);
    assert_eq!(
        again.consume(&id, &r, Instant::now()),
        Err(Refusal::Unknown(id))
    );
}

#[test]
fn an_expired_approval_and_one_minted_after_now_are_not_pending_again() {
    let state = tempfile::tempdir().unwrap();
    let now_ms = unix_ms_now();
    let kept = |id: &str, minted_unix_ms: u64| KeptApproval {
        id: ApprovalId::new(id).unwrap(),
        session: SessionId::new("main").unwrap(),
        tool: "write_file".into(),
        args_sha256: crate::audit::args_sha256(ARGS),
        minted_unix_ms,
    };
    Kept::in_dir(state.path())
        .save(vec![
            kept("ap-fresh", now_ms - 1_000),
            kept("ap-expired", now_ms - EXPIRE_MS - 1),
            kept("ap-future", now_ms + 3_600_000),
        ])
        .unwrap();
    let mut table = ApprovalTable::kept_in(&settings(), state.path());
    assert_eq!(table.pending(), 1);
    for id in ["ap-expired", "ap-future"] {
        let id = ApprovalId::new(id).unwrap();
        assert_eq!(
            table.consume(&id, &request(ARGS), Instant::now()),
            Err(Refusal::Unknown(id))
        );
    }
    table
        .consume(
            &ApprovalId::new("ap-fresh").unwrap(),
            &request(ARGS),
            Instant::now(),
        )
        .unwrap();
}

#[test]
fn a_damaged_file_is_read_as_no_approvals_and_replaced_by_the_next_mint() {
    let state = tempfile::tempdir().unwrap();
    let path = state.path().join(APPROVALS_FILE);
    std::fs::write(&path, "{not json").unwrap();
    let mut table = ApprovalTable::kept_in(&settings(), state.path());
    assert_eq!(table.pending(), 0);
    let id = table.mint(&request(ARGS), Instant::now()).unwrap();
    let written = Kept::in_dir(state.path()).load();
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].id, id);
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions())
            & 0o777,
        0o600
    );
}

#[test]
fn a_mint_or_a_use_that_cannot_be_written_runs_nothing() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("state");
    std::fs::create_dir(&dir).unwrap();
    let mut table = ApprovalTable::kept_in(&settings(), &dir);
    let r = request(ARGS);
    let id = table.mint(&r, Instant::now()).unwrap();
    // The state dir is gone: nothing can be written any more.
    std::fs::rename(&dir, state.path().join("moved")).unwrap();
    let refusal = table.consume(&id, &r, Instant::now()).unwrap_err();
    assert!(
        matches!(&refusal, Refusal::NotKept { id: refused, .. } if *refused == id),
        "{refusal:?}"
    );
    assert!(refusal.to_string().contains("does not run"), "{refusal}");
    assert_eq!(table.pending(), 1, "still pending, as on disk");
    match table.mint(&request("{}"), Instant::now()) {
        Err(MintError::NotKept(why)) => assert!(why.contains(APPROVALS_FILE), "{why}"),
        other => panic!("expected NotKept, got {other:?}"),
    }
    assert_eq!(table.pending(), 1, "the new one is not pending");
}
