//! How calls waiting for the owner read for people: the `boxctl approvals` table, a call's age,
//! a request and its decision as `task` and `show --follow` print them, and what an answer
//! recorded.

use crate::safe_text::{one_line, terminal_safe};
use bxcore::{ApprovalDecision, ApprovalId, Timestamp};
use proto::api::{ApprovalAnswered, ApprovalList};

/// The most characters of a call's arguments in the `boxctl approvals` table: enough for a
/// path and the start of a content, short enough for one line; `--json` has them whole.
pub const MAX_LISTED_ARGUMENT_CHARS: usize = 60;
/// The most characters of a waiting call's arguments shown as it is asked: the owner decides
/// on them, so far more than a tool call's line; `boxctl approvals --json` has them whole.
pub const MAX_APPROVAL_ARGUMENT_CHARS: usize = 2_000;

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
/// line saying so when none waits.
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
                one_line(&a.tool, None),
                age(&a.asked, now),
                one_line(a.arguments.trim(), Some(MAX_LISTED_ARGUMENT_CHARS)),
                one_line(&a.reason, None),
            ]
        })
        .collect();
    crate::table::columns(
        ["ID", "SESSION", "TOOL", "AGE", "ARGUMENTS", "REASON"],
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

/// A call that waits for the owner, as three lines: what would run, why it is asked, and how
/// to answer it (and that silence denies it).
pub fn approval_request_text(
    approval: &ApprovalId,
    tool: &str,
    arguments: &str,
    reason: &str,
    timeout_ms: u64,
) -> String {
    let id = terminal_safe(approval.as_str());
    let shown = one_line(arguments.trim(), Some(MAX_APPROVAL_ARGUMENT_CHARS));
    let cut = match arguments.trim().chars().count() > MAX_APPROVAL_ARGUMENT_CHARS {
        true => " (cut; boxctl approvals --json shows them whole)",
        false => "",
    };
    format!(
        "? approval {id}: {} {shown}{cut}\n  why: {}\n  answer: boxctl approve {id} [--for-turn], \
         or boxctl deny {id} [--reason TEXT]; without an answer in {} it is denied\n",
        one_line(tool, None),
        one_line(reason, None),
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
