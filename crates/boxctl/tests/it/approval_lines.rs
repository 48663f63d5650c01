//! How a call waiting for the owner and its decision read as `task` and `show --follow` print
//! them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use boxctl::format::EventPrinter;
use bxcore::{CallId, SessionId, TurnEvent};

fn approval_requested(arguments: &str) -> TurnEvent {
    TurnEvent::ApprovalRequested {
        call: CallId(4),
        approval: bxcore::ApprovalId::new("ap-1").unwrap(),
        tool: "write_file".into(),
        arguments: arguments.into(),
        reason: "write_file after untrusted text entered the session".into(),
        timeout_ms: 90_000,
    }
}

#[test]
fn format_an_approval_request_says_what_would_run_why_and_how_to_answer() {
    let mut printer = EventPrinter::new(false, false);
    let mut out = printer
        .print(&TurnEvent::Content {
            text: "Saving".into(),
        })
        .out;
    let printed = printer.print(&approval_requested(
        "{\"path\":\"/n/a.txt\",\n\"content\":\"\u{1b}[2Jhi\"}",
    ));
    out.push_str(&printed.out);
    assert_eq!(printed.err, "");
    assert_eq!(
        out,
        "Saving\n\
         ? approval ap-1: write_file {\"path\":\"/n/a.txt\", ⏎ \"content\":\"\\u{1b}[2Jhi\"}\n\
         \x20 why: write_file after untrusted text entered the session\n\
         \x20 answer: boxctl approve ap-1 [--for-turn], or boxctl deny ap-1 [--reason TEXT]; \
         without an answer in 1m it is denied\n"
    );
    // Long arguments are shown whole: the owner decides on all of them.
    let long = format!("{{\"content\":\"{}\"}}", "a".repeat(3_000));
    let printed = EventPrinter::new(false, false).print(&approval_requested(&long));
    let first = printed.out.lines().next().unwrap();
    assert!(first.ends_with(&long), "{first}");
}

/// Issue 32: a right-to-left override makes `/srv/txt.exe` read as `/srv/exe.txt`, and a path
/// cut short hides where the write goes. The request shows both as they are.
#[test]
fn format_an_approval_request_writes_out_bidi_and_shows_a_long_path_whole() {
    let path = format!("/srv/{}/end", "d".repeat(191));
    assert_eq!(path.chars().count(), 200);
    let arguments = format!("{{\"content\":\"x\",\"path\":\"{path}/\u{202e}txt.exe\u{200b}\"}}");
    let printed = EventPrinter::new(false, false).print(&approval_requested(&arguments));
    let first = printed.out.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "? approval ap-1: write_file {{\"content\":\"x\",\"path\":\"{path}/\\u{{202e}}txt.exe\\u{{200b}}\"}}"
        )
    );
    assert!(!printed.out.contains('\u{202e}'), "{}", printed.out);
    // A subagent's request, on one line, the same.
    let nested = TurnEvent::Subagent {
        session: SessionId::new("sub-s1-1").unwrap(),
        event: Box::new(approval_requested(&arguments)),
    };
    let line = EventPrinter::new(false, false).print(&nested).out;
    assert!(
        line.contains(&format!("{path}/\\u{{202e}}txt.exe")),
        "{line}"
    );
    assert!(!line.contains('\u{202e}'), "{line}");
}

#[test]
fn format_each_approval_decision_reads_as_whether_the_call_runs() {
    use bxcore::ApprovalDecision::*;
    let mut printer = EventPrinter::new(false, false);
    let cases = [
        (Approved, "approved, the call runs"),
        (
            ApprovedForTurn,
            "approved, and the tool's later calls in this turn run unasked",
        ),
        (Denied, "denied, the call does not run"),
        (
            TimedOut,
            "timed out (no answer from the owner), the call does not run",
        ),
        (
            Void,
            "void (the wait ended without an answer), the call does not run",
        ),
    ];
    for (decision, words) in cases {
        let event = TurnEvent::ApprovalDecided {
            call: CallId(4),
            approval: bxcore::ApprovalId::new("ap-1").unwrap(),
            decision,
        };
        assert_eq!(
            printer.print(&event).out,
            format!("= approval ap-1: {words}\n")
        );
    }
}

#[test]
fn format_a_subagents_approval_is_one_indented_line() {
    let mut printer = EventPrinter::new(false, false);
    let nested = TurnEvent::Subagent {
        session: SessionId::new("sub-s1-1").unwrap(),
        event: Box::new(approval_requested("{}")),
    };
    assert_eq!(
        printer.print(&nested).out,
        "  [sub-s1-1] ? approval ap-1: write_file {} (write_file after untrusted text entered \
         the session); boxctl approve|deny ap-1\n"
    );
}
