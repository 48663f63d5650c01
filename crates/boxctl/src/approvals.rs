//! How calls waiting for the owner read for people: the `boxctl approvals` table, a call's age,
//! a request and its decision as `task` and `show --follow` print them, and what an answer
//! recorded.
//!
//! The owner decides on what these show, so a call's tool, arguments and reason are shown in
//! full, never cut (a path cut short could hide where a write goes), with every hidden
//! character written out (`safe_text::in_full`): what the owner reads is what runs.

use crate::safe_text::{in_full, terminal_safe};
use bxcore::{ApprovalDecision, ApprovalId, Timestamp};
use proto::api::{ApprovalAnswered, ApprovalList};

/// `seconds` in its largest whole unit: `12s`, `3m`, `2h`, `1d`.
pub fn age_words(seconds: u64) -> String {
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3_600 => format!("{}m", seconds / 60),
        3_600..86_400 => format!("{}h", seconds / 3_600),
        _ => format!("{}d", seconds / 86_400),
    }
}

/// How long ago `then` was at `now`, as [`age_words`]; `0s` when the clocks disagree.
pub fn age(then: &Timestamp, now: &Timestamp) -> String {
    let seconds = now.unix_seconds().saturating_sub(then.unix_seconds());
    age_words(u64::try_from(seconds).unwrap_or(0))
}

/// The waiting calls as a table with a header, oldest first, their ages taken at `now`; a
/// line saying so when none waits. The arguments, whole, are the last column, so that however
/// long they are no other column is pushed aside.
pub fn approvals_table(list: &ApprovalList, now: &Timestamp) -> String {
    if list.approvals.is_empty() {
        return "no calls wait for approval\n".into();
    }
    let rows: Vec<[String; 6]> = list
        .approvals
        .iter()
        .map(|a| {
            [
                terminal_safe(a.id.as_str()).into_owned(),
                terminal_safe(a.session.as_str()).into_owned(),
                in_full(&a.tool),
                age(&a.asked, now),
                in_full(&a.reason),
                in_full(&a.arguments),
            ]
        })
        .collect();
    crate::table::columns(
        ["ID", "SESSION", "TOOL", "AGE", "REASON", "ARGUMENTS"],
        &rows,
    )
}

/// What an answer recorded, as one line: `approved ap-1 (session s1, call 4)`.
pub fn answered_line(answered: &ApprovalAnswered) -> String {
    let what = match answered.decision {
        ApprovalDecision::ApprovedForTurn => "approved for the rest of the turn",
        other => other.as_str(),
    };
    format!(
        "{what} {} (session {}, call {})",
        terminal_safe(answered.id.as_str()),
        terminal_safe(answered.session.as_str()),
        answered.call
    )
}

/// A call that waits for the owner, as three lines: what would run (its arguments whole), why
/// it is asked, and how to answer it (and that silence denies it).
pub fn approval_request_text(
    approval: &ApprovalId,
    tool: &str,
    arguments: &str,
    reason: &str,
    timeout_ms: u64,
) -> String {
    let id = terminal_safe(approval.as_str());
    format!(
        "? approval {id}: {} {}\n  why: {}\n  answer: boxctl approve {id} [--for-turn], \
         or boxctl deny {id} [--reason TEXT]; without an answer in {} it is denied\n",
        in_full(tool),
        in_full(arguments),
        in_full(reason),
        wait_words(timeout_ms),
    )
}

/// What became of a waiting call, as one line: `approval ap-1: approved, the call runs`.
pub fn approval_decided_line(approval: &ApprovalId, decision: ApprovalDecision) -> String {
    let words = match decision {
        ApprovalDecision::Approved => "approved, the call runs",
        ApprovalDecision::ApprovedForTurn => {
            "approved, and the tool's later calls in this turn run unasked"
        }
        ApprovalDecision::Denied => "denied, the call does not run",
        ApprovalDecision::TimedOut => "timed out (no answer from the owner), the call does not run",
        ApprovalDecision::Void => "void (the wait ended without an answer), the call does not run",
    };
    format!("= approval {}: {words}", terminal_safe(approval.as_str()))
}

/// `ms` as words for how long a turn waits: `10m`, `45s`.
pub fn wait_words(ms: u64) -> String {
    age_words(ms / 1_000)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn ages_read_in_their_largest_unit() {
        let cases = [
            (0, "0s"),
            (12, "12s"),
            (59, "59s"),
            (60, "1m"),
            (185, "3m"),
            (3_600, "1h"),
            (86_399, "23h"),
            (90_000, "1d"),
        ];
        for (seconds, words) in cases {
            assert_eq!(age_words(seconds), words, "{seconds}");
        }
        let then = Timestamp::parse("2026-01-02T03:04:05Z").unwrap();
        let later = Timestamp::parse("2026-01-02T03:07:10Z").unwrap();
        assert_eq!(age(&then, &later), "3m");
        assert_eq!(age(&later, &then), "0s", "a clock behind reads 0s");
    }
}
