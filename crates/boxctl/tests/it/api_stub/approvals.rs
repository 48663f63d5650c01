//! The stand-in's approval: the one call it says waits, and who may answer it.
#![allow(clippy::unwrap_used)]

use bxcore::{DataClass, SessionId, Timestamp};

/// The one call the stub says waits for approval: `ap-1`, a `write_file` of session `s1`.
pub fn stub_pending_approval() -> proto::api::PendingApproval {
    proto::api::PendingApproval {
        id: bxcore::ApprovalId::new("ap-1").unwrap(),
        session: SessionId::new("s1").unwrap(),
        turn: 3,
        call: bxcore::CallId(4),
        tool: "write_file".into(),
        arguments: r#"{"path":"/srv/notes/a.txt","content":"hello"}"#.into(),
        reason: "write_file asks the owner first (approve = always)".into(),
        class: DataClass::Public,
        untrusted: false,
        asked: Timestamp::parse("2026-01-02T03:04:05Z").unwrap(),
        timeout_ms: 600_000,
    }
}

/// This test process's uid: what loopd's API reads from a peer that is this process or a
/// child of it (`SO_PEERCRED`).
pub fn own_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid()
}
