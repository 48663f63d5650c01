#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Which results are summarised and what a failed summary leaves: only results that ran and
//! succeeded are summarised (not a denial, a failure or a call that was not run), and a failed
//! summary is a `Note` in the session log, tried once.

use crate::session::Session;
use crate::summarise::FAILED_NOTE;
use crate::tests::bed::{Bed, ROOMY_N_CTX, SUMMARY_PHRASE, SYSTEM};
use crate::tools::{Registry, ToolPort};
use crate::turn::{Runtime, Stop, run_turn, start_turn};
use bxcore::{DataClass, DenyReason, LogRecord, TurnEnd};
use proto::{ToolRequest, ToolResponse};

/// A port that answers `echo` by its text: `deny` is refused, `fail` fails, anything else runs.
struct Outcomes;

impl ToolPort for Outcomes {
    fn call(&self, request: &ToolRequest) -> ToolResponse {
        let text = request.arguments.to_string();
        if text.contains("deny") {
            ToolResponse::Denied {
                reason: DenyReason::Egress,
                detail: None,
                labels: None,
            }
        } else if text.contains("fail") {
            ToolResponse::Failed {
                message: "the page did not load".into(),
                labels: None,
            }
        } else {
            ToolResponse::Result {
                content: format!("RAN {text}"),
                class: DataClass::Public,
                untrusted: true,
                truncated: false,
            }
        }
    }
}

/// A `call_tool` of `echo` with `text`, as a script's tool call.
fn echo(text: &str) -> String {
    format!(
        r#"{{ name = "call_tool", arguments = "{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{text}\"}}}}" }}"#
    )
}

/// A script whose task "go" makes `calls`, and whose summaries answer with `summary_rule`.
fn script(calls: &[String], summary_rule: &str) -> String {
    format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "{SUMMARY_PHRASE}"
{summary_rule}
[[rule]]
when_role = "user"
when_contains = "go"
times = 1
tool_calls = [{}]
"#,
        calls.join(", ")
    )
}

/// Runs the task "go" on `session` with the [`Outcomes`] port (`finish_turn` included).
fn go(bed: &Bed, session: &mut Session) -> TurnEnd {
    let blocking = bed.fake.blocking();
    let client = bed.fake.client();
    let registry = Registry::m2b();
    let rt = Runtime {
        cfg: &bed.cfg,
        models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
        blocking: &blocking,
        port: &Outcomes,
        registry: &registry,
        system: SYSTEM,
        n_ctx: ROOMY_N_CTX,
        children: &crate::subagent::Subagents,
        owner: &crate::turn::NoOwner,
        meter: &crate::turn::NoMeter,
    };
    start_turn(session, "go").unwrap();
    run_turn(&rt, session, &Stop::default(), &mut |_| {}).unwrap()
}

/// The summaries and notes of a session, by the call they name.
fn summaries_and_notes(session: &Session) -> (Vec<u64>, Vec<String>) {
    let mut summaries = Vec::new();
    let mut notes = Vec::new();
    for record in session.records() {
        match record {
            LogRecord::ToolSummary { call, .. } => summaries.push(call.0),
            LogRecord::Note { text, .. } => notes.push(text.clone()),
            _ => {}
        }
    }
    (summaries, notes)
}

#[test]
fn only_a_result_that_ran_and_succeeded_is_summarised() {
    let calls = [
        echo("deny me"),
        echo("fail me"),
        // `echo` is not in the tools array: loopd answers that it was not run.
        r#"{ name = "echo", arguments = "{\"text\":\"direct\"}" }"#.to_string(),
        echo("fine"),
    ];
    let bed = Bed::new(&script(&calls, "reply = \"SUMMARY\""));
    let mut session = bed.session("s");
    assert_eq!(go(&bed, &mut session), TurnEnd::Done);
    let ok_call = session
        .records()
        .iter()
        .find_map(|r| match r {
            LogRecord::ToolResult {
                call,
                outcome: bxcore::ToolOutcome::Ok,
                ..
            } => Some(call.0),
            _ => None,
        })
        .unwrap();
    let (summaries, notes) = summaries_and_notes(&session);
    assert_eq!(summaries, [ok_call], "only the call that ran: {notes:?}");
    assert_eq!(bed.bodies_with(SUMMARY_PHRASE).len(), 1);
}

#[test]
fn a_failed_summary_is_a_note_in_the_log_and_is_not_tried_again() {
    let bed = Bed::new(&script(
        &[echo("fine")],
        r#"error = { status = 500, type = "server_error", message = "the model fell over" }"#,
    ));
    let mut session = bed.session("s");
    assert_eq!(go(&bed, &mut session), TurnEnd::Done);
    let (summaries, notes) = summaries_and_notes(&session);
    assert!(summaries.is_empty());
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with(&format!("{FAILED_NOTE} 1: ")),
        "{notes:?}"
    );
    assert!(notes[0].contains("the model fell over"), "{notes:?}");
    assert_eq!(bed.bodies_with(SUMMARY_PHRASE).len(), 1);

    bed.fake.server.clear_requests();
    bed.with_rt(ROOMY_N_CTX, |rt| {
        crate::summarise::missing(rt, &mut session).unwrap();
    });
    assert!(
        bed.bodies_with(SUMMARY_PHRASE).is_empty(),
        "not tried again"
    );
    assert_eq!(summaries_and_notes(&session).1.len(), 1, "no second note");
}

#[test]
fn once_the_epoch_does_not_fit_the_rest_are_noted_without_a_call() {
    let bed = Bed::new(&script(
        &[echo("one"), echo("two")],
        r#"error = { status = 400, type = "exceed_context_size_error", message = "the request exceeds the available context size" }"#,
    ));
    let mut session = bed.session("s");
    assert_eq!(go(&bed, &mut session), TurnEnd::Done);
    let (summaries, notes) = summaries_and_notes(&session);
    assert!(summaries.is_empty());
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(
        notes[0].starts_with(&format!("{FAILED_NOTE} 1: ")),
        "{notes:?}"
    );
    assert!(
        notes[1].starts_with(&format!("{FAILED_NOTE} 2: ")),
        "{notes:?}"
    );
    assert!(notes[1].contains("not tried"), "{notes:?}");
    assert_eq!(
        bed.bodies_with(SUMMARY_PHRASE).len(),
        1,
        "one call, not two"
    );
}
