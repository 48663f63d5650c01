//! The stand-in's approval and schedule, as the routes answer them.
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

/// The one schedule the stub has: `daily`, at 07:00 UTC, last run done.
pub fn stub_schedule(paused: bool) -> proto::api::ScheduleInfo {
    let time = |t: &str| Timestamp::parse(t).unwrap();
    proto::api::ScheduleInfo {
        name: "daily".into(),
        timing: "cron 0 7 * * *".into(),
        timezone: "UTC".into(),
        session: "new".into(),
        enabled: true,
        paused,
        next_run: (!paused).then(|| time("2026-01-03T07:00:00Z")),
        last_due: Some(time("2026-01-02T07:00:00Z")),
        last_run: Some(proto::api::ScheduleRun {
            started: time("2026-01-02T07:00:00Z"),
            trigger: proto::api::RunTrigger::Due,
            session: SessionId::new("daily-20260102T070000Z").unwrap(),
            turn: Some(1),
            outcome: proto::api::RunOutcome::Ended {
                end: bxcore::TurnEnd::Done,
                notified: true,
                not_approved: 0,
            },
        }),
    }
}
