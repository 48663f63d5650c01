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
         ? approval ap-1: write_file {\"path\":\"/n/a.txt\", ⏎ \"content\":\"[2Jhi\"}\n\
         \x20 why: write_file after untrusted text entered the session\n\
         \x20 answer: boxctl approve ap-1 [--for-turn], or boxctl deny ap-1 [--reason TEXT]; \
         without an answer in 1m it is denied\n"
    );
    // Long arguments are cut far later than a tool call's line, and say where they are whole.
    let long = format!("{{\"content\":\"{}\"}}", "a".repeat(3_000));
    let printed = EventPrinter::new(false, false).print(&approval_requested(&long));
    let first = printed.out.lines().next().unwrap();
    assert!(first.contains(&"a".repeat(1_900)), "{first}");
    assert!(
        first.ends_with("… (cut; boxctl approvals --json shows them whole)"),
        "{first}"
    );
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
