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

/// A session whose records hold markup and script, as a hostile page or tool might write them.
pub const XSS_SESSION: &str = "xss";

/// What every hostile text of [`hostile_page`] holds: a script that would mark the page.
pub const HOSTILE: &str = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>";

/// The records of [`XSS_SESSION`]: a task, an answer with a call, and an untrusted result,
/// each holding [`HOSTILE`].
pub fn hostile_page(id: &SessionId) -> proto::api::RecordsPage {
    use bxcore::{CallId, LogRecord, ToolCall, ToolOutcome};
    let time = Timestamp::parse("2026-01-02T03:04:05Z").unwrap();
    proto::api::RecordsPage {
        session: id.clone(),
        from: 0,
        records: vec![
            LogRecord::User {
                time,
                turn: 1,
                content: format!("fetch this {HOSTILE}"),
                task_id: None,
            },
            LogRecord::Assistant {
                time,
                content: format!("calling {HOSTILE}"),
                reasoning: None,
                tool_calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "http_fetch".into(),
                    arguments: serde_json::json!({ "url": HOSTILE }).to_string(),
                }],
                usage: None,
            },
            LogRecord::ToolResult {
                time,
                call: CallId(1),
                tool_call_id: "c1".into(),
                content: format!("page: {HOSTILE}"),
                class: DataClass::Public,
                untrusted: true,
                truncated: false,
                outcome: ToolOutcome::Ok,
                by_loopd: false,
            },
        ],
        next: None,
    }
}

/// The stand-in's last turn of `s1` (its `sessions` says so).
const S1_LAST_TURN: u64 = 5;

/// What the stand-in's undo of `asked` does: the turns from `from_turn` (or
/// `S1_LAST_TURN - turns + 1`) on, one file restored (its name holding a right-to-left
/// override) and one removed; undoing from turn 1 is a conflict, as brokerd answers when a
/// file was changed since, and from a turn past the last a bad request, as loopd answers.
pub fn stub_undo(
    id: &SessionId,
    asked: &proto::UndoTurns,
) -> Result<proto::UndoAnswer, loopd::api::ApiFailure> {
    let first = asked
        .from_turn
        .unwrap_or_else(|| (S1_LAST_TURN + 1).saturating_sub(asked.turns));
    if first > S1_LAST_TURN {
        return Err(loopd::api::ApiFailure::BadRequest(format!(
            "session s1 has turns 1 to {S1_LAST_TURN}: there is no turn {first} to undo from"
        )));
    }
    if first <= 1 {
        return Err(loopd::api::ApiFailure::Conflict(
            "/srv/notes/a.txt was changed since turn 1 wrote it: nothing was undone".into(),
        ));
    }
    Ok(proto::UndoAnswer {
        session: id.clone(),
        turns: (first..=S1_LAST_TURN).collect(),
        files: vec![
            proto::PutBack {
                path: "/srv/notes/\u{202e}txt.exe".into(),
                turn: S1_LAST_TURN,
                removed: false,
            },
            proto::PutBack {
                path: "/srv/notes/new.txt".into(),
                turn: first,
                removed: true,
            },
        ],
        dry_run: asked.dry_run,
    })
}

/// What the stand-in says turn `turn` (or every turn) of `id` changed: one diff holding markup.
pub fn stub_diff(id: &SessionId, turn: Option<u64>) -> proto::DiffAnswer {
    proto::DiffAnswer {
        session: id.clone(),
        files: vec![proto::FileDiff {
            path: "/srv/notes/a.txt".into(),
            turn: turn.unwrap_or(S1_LAST_TURN),
            diff: "--- a/srv/notes/a.txt\n+++ b/srv/notes/a.txt\n@@ -1 +1 @@\n-old\n+<script>alert(1)</script>\n"
                .into(),
        }],
    }
}
