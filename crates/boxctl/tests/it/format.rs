//! How boxctl shows events, records and answers: pure functions, checked line by line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use boxctl::answers::{cancel_text, sessions_table};
use boxctl::format::{
    EventPrinter, MAX_RESULT_PREVIEW_CHARS, Printed, one_line, terminal_safe, tool_call_line,
    tool_result_line,
};
use boxctl::records::record_lines;
use bxcore::{
    CallId, DataClass, DenyReason, LogRecord, SessionId, Timestamp, ToolCall, ToolOutcome, TurnEnd,
    TurnEvent,
};
use proto::api::{CancelAnswer, SessionInfo, SessionList};

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: arguments.into(),
    }
}

fn result(outcome: ToolOutcome, bytes: u64) -> TurnEvent {
    TurnEvent::ToolResult {
        call: CallId(1),
        outcome,
        class: DataClass::Public,
        untrusted: false,
        truncated: false,
        bytes,
    }
}

fn content(text: &str) -> TurnEvent {
    TurnEvent::Content { text: text.into() }
}

fn ended(end: TurnEnd) -> TurnEvent {
    TurnEvent::Ended {
        turn: 1,
        end,
        context: Default::default(),
    }
}

/// Everything `events` print, stdout and stderr each joined.
fn print_all(printer: &mut EventPrinter, events: &[TurnEvent]) -> Printed {
    let mut all = Printed::default();
    for event in events {
        let printed = printer.print(event);
        all.out.push_str(&printed.out);
        all.err.push_str(&printed.err);
    }
    all
}

#[test]
fn format_tool_lines() {
    assert_eq!(tool_call_line(&call("clock", "{}")), "→ clock {}");
    assert_eq!(
        tool_call_line(&call("echo", "{\"text\":\n\"hi\"}")),
        "→ echo {\"text\": ⏎ \"hi\"}"
    );
    let long = format!("{{\"x\":\"{}\"}}", "a".repeat(500));
    assert!(tool_call_line(&call("echo", &long)).ends_with('…'));
    assert_eq!(
        tool_result_line(&ToolOutcome::Ok, 25, false, false),
        "← ok, 25 bytes"
    );
    assert_eq!(
        tool_result_line(&ToolOutcome::Failed, 40, true, true),
        "← failed, 40 bytes, truncated, untrusted"
    );
    let denied = ToolOutcome::Denied {
        reason: DenyReason::NoGrant,
    };
    assert_eq!(
        tool_result_line(&denied, 60, false, false),
        "← denied: no_grant"
    );
}

#[test]
fn format_a_streamed_turn_puts_tool_lines_on_their_own_lines() {
    let mut printer = EventPrinter::new(false, false);
    let printed = print_all(
        &mut printer,
        &[
            TurnEvent::Started {
                session: SessionId::new("s1").unwrap(),
                turn: 1,
            },
            content("Let me "),
            content("check."),
            TurnEvent::Reasoning {
                text: "hidden".into(),
            },
            TurnEvent::ToolCall {
                call: CallId(1),
                tool_call: call("clock", "{}"),
            },
            result(ToolOutcome::Ok, 25),
            content("It is noon."),
            ended(TurnEnd::Done),
        ],
    );
    assert_eq!(
        printed.out,
        "Let me check.\n→ clock {}\n← ok, 25 bytes\nIt is noon.\n"
    );
    assert_eq!(printed.err, "");
    assert_eq!(printer.finish(), "");
}

#[test]
fn format_reasoning_shows_only_when_asked_prefixed_or_dimmed() {
    let events = [
        TurnEvent::Reasoning {
            text: "think".into(),
        },
        content("answer"),
        ended(TurnEnd::Done),
    ];
    let plain = print_all(&mut EventPrinter::new(true, false), &events);
    assert_eq!(plain.out, "thinking: think\nanswer\n");
    let dim = print_all(&mut EventPrinter::new(true, true), &events);
    assert_eq!(dim.out, "\x1b[2mthink\x1b[0m\nanswer\n");
    let hidden = print_all(&mut EventPrinter::new(false, true), &events);
    assert_eq!(hidden.out, "answer\n");
}

#[test]
fn format_retries_and_unfinished_ends_go_to_stderr() {
    let mut printer = EventPrinter::new(false, false);
    let printed = print_all(
        &mut printer,
        &[
            TurnEvent::Retry {
                attempt: 1,
                delay_ms: 500,
                error: "503 Loading model".into(),
            },
            content("partial"),
            ended(TurnEnd::Failed {
                reason: "llama-server is gone".into(),
            }),
        ],
    );
    assert_eq!(printed.out, "partial\n");
    assert_eq!(
        printed.err,
        "boxctl: model call failed (attempt 1): 503 Loading model; retrying in 500 ms\n\
         boxctl: the turn failed: llama-server is gone\n"
    );
    for (end, says) in [
        (TurnEnd::Cancelled, "cancelled"),
        (TurnEnd::MaxSteps, "step limit"),
        (TurnEnd::Interrupted, "interrupted"),
    ] {
        let err = EventPrinter::new(false, false).print(&ended(end)).err;
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn format_escape_sequences_from_the_model_never_reach_the_terminal() {
    assert_eq!(terminal_safe("a\x1b[31mb\tc\n\u{9b}d\r"), "a[31mb\tc\nd");
    let out = EventPrinter::new(false, false)
        .print(&content("\x1b]0;pwned\x07ok"))
        .out;
    assert_eq!(out, "]0;pwnedok");
    assert_eq!(one_line("a\r\nb\n", None), "a ⏎ b");
}

fn at(time: &str) -> Timestamp {
    Timestamp::parse(time).unwrap()
}

#[test]
fn format_records_read_one_line_each() {
    let t = at("2026-01-02T03:04:05Z");
    let lines = |r: &LogRecord| record_lines(r, false);
    assert_eq!(
        lines(&LogRecord::Header {
            version: 1,
            session: SessionId::new("s1").unwrap(),
            time: t,
        }),
        ["── session s1, created 2026-01-02T03:04:05Z"]
    );
    assert_eq!(
        lines(&LogRecord::User {
            time: t,
            turn: 2,
            content: "what time\nis it?".into(),
            task_id: None,
        }),
        ["03:04:05 user [turn 2]: what time ⏎ is it?"]
    );
    let assistant = LogRecord::Assistant {
        time: t,
        content: "Let me check.".into(),
        reasoning: Some("hmm".into()),
        tool_calls: vec![call("clock", "{}"), call("echo", "{\"text\":\"x\"}")],
        usage: None,
    };
    assert_eq!(
        lines(&assistant),
        [
            "03:04:05 assistant: Let me check.",
            "03:04:05 → clock {}",
            "03:04:05 → echo {\"text\":\"x\"}",
        ]
    );
    assert_eq!(record_lines(&assistant, true)[0], "03:04:05 thinking: hmm");
    let long = "z".repeat(1000);
    let tool = LogRecord::ToolResult {
        time: t,
        call: CallId(7),
        tool_call_id: "c1".into(),
        content: long,
        class: DataClass::Public,
        untrusted: true,
        truncated: false,
        outcome: ToolOutcome::Ok,
        by_loopd: false,
    };
    let line = &lines(&tool)[0];
    assert!(
        line.starts_with("03:04:05 ← ok, 1000 bytes, untrusted (call 7): zzz"),
        "{line}"
    );
    assert_eq!(
        line.chars().filter(|c| *c == 'z').count(),
        MAX_RESULT_PREVIEW_CHARS
    );
    assert_eq!(
        lines(&LogRecord::TurnEnd {
            time: t,
            turn: 2,
            end: TurnEnd::Failed {
                reason: "gone".into()
            },
        }),
        ["03:04:05 turn 2 ended: failed: gone"]
    );
    assert_eq!(
        lines(&LogRecord::Note {
            time: t,
            text: "recovered".into()
        }),
        ["03:04:05 note: recovered"]
    );
}

#[test]
fn format_sessions_as_an_aligned_table() {
    let info = |id: &str, last_turn, records, busy, queued| SessionInfo {
        id: SessionId::new(id).unwrap(),
        last_turn,
        records,
        busy,
        queued,
    };
    let list = SessionList {
        sessions: vec![
            info("s1", 3, 12, true, 2),
            info("a-longer-id", 10, 140, false, 0),
        ],
    };
    assert_eq!(
        sessions_table(&list),
        "SESSION      TURNS  RECORDS  STATE\n\
         s1               3       12  busy, 2 queued\n\
         a-longer-id     10      140  idle\n"
    );
    assert_eq!(
        sessions_table(&SessionList { sessions: vec![] }),
        "no sessions\n"
    );
}

#[test]
fn format_cancel_says_what_it_did() {
    let answer = |cancelled, dropped| CancelAnswer {
        session: SessionId::new("s1").unwrap(),
        cancelled,
        dropped,
    };
    assert_eq!(
        cancel_text(&answer(true, 2)),
        "cancelled the running turn of s1; dropped 2 queued tasks\n"
    );
    assert_eq!(
        cancel_text(&answer(false, 0)),
        "no turn was running in s1\n"
    );
    assert_eq!(
        cancel_text(&answer(false, 1)),
        "no turn was running in s1; dropped 1 queued task\n"
    );
}

#[test]
fn format_compact_says_what_began_and_how() {
    let answer = |model_failure: Option<&str>, notes| proto::api::CompactAnswer {
        session: SessionId::new("s1").unwrap(),
        epoch: 2,
        model_failure: model_failure.map(str::to_string),
        carry_chars: 812,
        notes,
    };
    assert_eq!(
        boxctl::listing::compact_line(&answer(None, 1)),
        "s1: epoch 2 began; its carry has 812 characters, written by the model; 1 memory note \
         stored"
    );
    assert_eq!(
        boxctl::listing::compact_line(&answer(Some("the model call failed:\nno"), 0)),
        "s1: epoch 2 began; its carry has 812 characters, kept without the model (the model \
         call failed: ⏎ no)"
    );
}

#[test]
fn format_a_subagents_events_are_indented_under_the_parents_call() {
    let child = |event: TurnEvent| TurnEvent::Subagent {
        session: bxcore::SessionId::new("sub-s-1").unwrap(),
        event: Box::new(event),
    };
    let grandchild = TurnEvent::Subagent {
        session: bxcore::SessionId::new("sub-s-1").unwrap(),
        event: Box::new(TurnEvent::Subagent {
            session: bxcore::SessionId::new("sub-sub-s-1-2").unwrap(),
            event: Box::new(TurnEvent::ToolCall {
                call: bxcore::CallId(1),
                tool_call: call("clock", "{}"),
            }),
        }),
    };
    let events = [
        content("Asking."),
        child(content("hidden child text")),
        child(TurnEvent::ToolCall {
            call: bxcore::CallId(1),
            tool_call: call("echo", "{}"),
        }),
        child(result(ToolOutcome::Ok, 3)),
        grandchild,
        child(ended(TurnEnd::Done)),
    ];
    let printed = print_all(&mut EventPrinter::new(false, false), &events);
    assert_eq!(
        printed.out,
        "Asking.\n  [sub-s-1] → echo {}\n  [sub-s-1] ← ok, 3 bytes\n    \
         [sub-sub-s-1-2] → clock {}\n  [sub-s-1] the subagent is done\n"
    );
    assert_eq!(printed.err, "");
}

#[test]
fn show_marks_loopds_own_answers_and_says_what_a_child_inherited() {
    let t = Timestamp::parse("2026-01-02T03:04:05Z").unwrap();
    let found = LogRecord::ToolResult {
        time: t,
        call: CallId(2),
        tool_call_id: "c1".into(),
        content: "1 tool(s) match".into(),
        class: DataClass::Public,
        untrusted: true,
        truncated: false,
        outcome: ToolOutcome::Ok,
        by_loopd: true,
    };
    // brokerd's audit log never sees these calls: the session log is their trail.
    assert_eq!(
        record_lines(&found, false),
        ["03:04:05 ← ok, 15 bytes, untrusted (call 2, answered by loopd): 1 tool(s) match"]
    );
    let inherited = LogRecord::Inherited {
        time: t,
        parent: SessionId::new("main").unwrap(),
        class: DataClass::Private,
        untrusted: true,
        root_session: SessionId::new("main").unwrap(),
        root_turn: 4,
    };
    assert_eq!(
        record_lines(&inherited, false),
        ["03:04:05 ── inherits [private, untrusted] from main; its calls count against main#4"]
    );
}

#[test]
fn a_child_at_its_step_limit_names_subagent_max_steps_and_the_parent_loop_max_steps() {
    let child = TurnEvent::Subagent {
        session: SessionId::new("sub-s-1").unwrap(),
        event: Box::new(ended(TurnEnd::MaxSteps)),
    };
    let printed = print_all(&mut EventPrinter::new(false, false), &[child]);
    assert_eq!(
        printed.out,
        "  [sub-s-1] the subagent stopped at its step limit (subagent.max_steps)\n"
    );
    let printed = print_all(
        &mut EventPrinter::new(false, false),
        &[ended(TurnEnd::MaxSteps)],
    );
    assert!(printed.err.contains("(loop.max_steps)"), "{}", printed.err);
}

#[test]
fn a_redirected_call_and_a_stopped_answer_say_so() {
    let t = Timestamp::parse("2026-01-02T03:04:05Z").unwrap();
    let redirected = LogRecord::ToolResult {
        time: t,
        call: CallId(2),
        tool_call_id: "c1".into(),
        content: "\"clock\" is a core tool: call it directly, not through call_tool.".into(),
        class: DataClass::Public,
        untrusted: false,
        truncated: false,
        outcome: ToolOutcome::Redirected,
        by_loopd: true,
    };
    assert!(
        record_lines(&redirected, false)[0].starts_with("03:04:05 ← redirected, 64 bytes (call 2"),
        "{:?}",
        record_lines(&redirected, false)
    );
    let printed = print_all(
        &mut EventPrinter::new(false, false),
        &[result(ToolOutcome::Redirected, 65)],
    );
    assert_eq!(printed.out, "← redirected, 65 bytes\n");
    let partial = LogRecord::PartialAnswer {
        time: t,
        content: "Once upon".into(),
        reasoning: Some("a story".into()),
    };
    assert_eq!(
        record_lines(&partial, true),
        [
            "03:04:05 thinking (stopped): a story",
            "03:04:05 assistant (stopped mid-answer): Once upon"
        ]
    );
    assert_eq!(record_lines(&partial, false).len(), 1);
}
