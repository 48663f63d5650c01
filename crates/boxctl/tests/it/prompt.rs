//! The inline `[y/N]` question: [`Prompter`] decides from events and lines (no terminal
//! needed), and [`Prompt`] posts what it decided to loopd's real API layer over the stub.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_stub::*;
use boxctl::client::{Client, StreamItem};
use boxctl::prompt::{DENIED_AT_PROMPT, Effect, Lines, Prompt, Prompter, asks_at};
use bxcore::{ApprovalDecision, ApprovalId, CallId, TurnEnd, TurnEvent};
use proto::api::{ApprovalAnswer, OwnerAnswer, TaskRequest};
use std::io::Write;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc::unbounded_channel;

fn ap(id: &str) -> ApprovalId {
    ApprovalId::new(id).unwrap()
}

fn requested(id: &str) -> TurnEvent {
    TurnEvent::ApprovalRequested {
        call: CallId(4),
        approval: ap(id),
        tool: "write_file".into(),
        arguments: "{}".into(),
        reason: "asks".into(),
        timeout_ms: 600_000,
    }
}

fn decided(id: &str, decision: ApprovalDecision) -> TurnEvent {
    TurnEvent::ApprovalDecided {
        call: CallId(4),
        approval: ap(id),
        decision,
    }
}

fn ended() -> TurnEvent {
    TurnEvent::Ended {
        turn: 3,
        end: TurnEnd::Done,
        context: Default::default(),
    }
}

fn ask(id: &str) -> Effect {
    Effect::Ask(format!("approve {id}? [y/N] "))
}

fn answer(id: &str, answer: OwnerAnswer) -> Effect {
    let reason = (answer == OwnerAnswer::Deny).then(|| DENIED_AT_PROMPT.to_string());
    Effect::Answer {
        id: ap(id),
        answer: ApprovalAnswer { answer, reason },
    }
}

#[test]
fn prompt_y_or_yes_approves_and_anything_else_denies() {
    for (line, expected) in [
        ("y", OwnerAnswer::Approve),
        ("yes", OwnerAnswer::Approve),
        (" Y \r", OwnerAnswer::Approve),
        ("YES", OwnerAnswer::Approve),
        ("", OwnerAnswer::Deny),
        ("n", OwnerAnswer::Deny),
        ("yes please", OwnerAnswer::Deny),
        ("approve", OwnerAnswer::Deny),
    ] {
        let mut prompter = Prompter::new();
        assert_eq!(prompter.event(&requested("ap-1")), [ask("ap-1")]);
        assert!(prompter.is_asking());
        assert_eq!(
            prompter.line(Some(line)),
            [answer("ap-1", expected)],
            "{line:?}"
        );
        assert!(!prompter.is_asking());
        // Its decision's event comes after the answer: nothing more is said or asked.
        assert_eq!(prompter.event(&decided("ap-1", expected.decision())), []);
    }
}

#[test]
fn prompt_a_decision_before_the_answer_drops_the_question_and_a_late_line_answers_nothing() {
    for decision in [
        ApprovalDecision::TimedOut,
        ApprovalDecision::Approved,
        ApprovalDecision::Denied,
        ApprovalDecision::Void,
    ] {
        let mut prompter = Prompter::new();
        prompter.event(&requested("ap-1"));
        let said = prompter.event(&decided("ap-1", decision));
        let [Effect::Say(text)] = &said[..] else {
            panic!("{said:?}")
        };
        assert!(text.starts_with("\nboxctl: approval ap-1 is "), "{text}");
        assert!(text.ends_with("; the question is dropped\n"), "{text}");
        assert!(!prompter.is_asking());
        assert_eq!(prompter.line(Some("y")), [], "{decision}");
    }
}

#[test]
fn prompt_lines_typed_while_nothing_is_asked_are_no_answer() {
    let mut prompter = Prompter::new();
    assert_eq!(prompter.line(Some("y")), []);
    assert_eq!(prompter.event(&requested("ap-1")), [ask("ap-1")]);
    assert_eq!(prompter.line(Some("")), [answer("ap-1", OwnerAnswer::Deny)]);
}

#[test]
fn prompt_asks_one_at_a_time_in_order() {
    let mut prompter = Prompter::new();
    assert_eq!(prompter.event(&requested("ap-1")), [ask("ap-1")]);
    assert_eq!(prompter.event(&requested("ap-2")), []);
    assert_eq!(prompter.event(&requested("ap-3")), []);
    // ap-3 is decided elsewhere while it waits its turn: never asked.
    assert_eq!(
        prompter.event(&decided("ap-3", ApprovalDecision::TimedOut)),
        []
    );
    assert_eq!(
        prompter.line(Some("y")),
        [answer("ap-1", OwnerAnswer::Approve), ask("ap-2")]
    );
    assert_eq!(
        prompter.line(Some("n")),
        [answer("ap-2", OwnerAnswer::Deny)]
    );
    assert!(!prompter.is_asking());
}

#[test]
fn prompt_stops_asking_when_stdin_ends_or_the_turn_ends() {
    let mut prompter = Prompter::new();
    prompter.event(&requested("ap-1"));
    let said = prompter.line(None);
    let [Effect::Say(text)] = &said[..] else {
        panic!("{said:?}")
    };
    assert!(
        text.contains("boxctl approve ap-1 or boxctl deny ap-1"),
        "{text}"
    );
    assert_eq!(
        prompter.event(&requested("ap-2")),
        [],
        "stdin ended: not asked"
    );

    let mut prompter = Prompter::new();
    prompter.event(&requested("ap-1"));
    // A subagent's end is not the turn's.
    let child_end = TurnEvent::Subagent {
        session: id("sub-s1-1"),
        event: Box::new(ended()),
    };
    assert_eq!(prompter.event(&child_end), []);
    assert!(prompter.is_asking());
    let said = prompter.event(&ended());
    assert!(
        matches!(&said[..], [Effect::Say(t)] if t.contains("the turn ended")),
        "{said:?}"
    );
    assert_eq!(prompter.line(Some("y")), []);
}

#[test]
fn prompt_asks_about_a_subagents_call_too() {
    let mut prompter = Prompter::new();
    let nested = TurnEvent::Subagent {
        session: id("sub-s1-1"),
        event: Box::new(requested("ap-7")),
    };
    assert_eq!(prompter.event(&nested), [ask("ap-7")]);
}

#[test]
fn prompt_asks_only_a_foreground_job_whose_stdin_and_stderr_are_terminals() {
    assert!(asks_at(true, true, true));
    for (stdin, stderr, foreground) in [
        (false, true, true), // stdin from a file or a pipe: a script
        (true, false, true), // stderr captured: nobody sees the question
        (true, true, false), // a background job: reading would stop it
        (false, false, false),
    ] {
        assert!(
            !asks_at(stdin, stderr, foreground),
            "{stdin} {stderr} {foreground}"
        );
    }
}

/// Stderr of a [`Prompt`] under test.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Runs a task in `session` of the stub with `lines` typed at the prompt; its events and what
/// the prompt said.
async fn prompted_task(served: &Served, session: &str, lines: &[&str]) -> (Vec<TurnEvent>, String) {
    let client = Client::new(&served.socket);
    let task = TaskRequest {
        session: Some(id(session)),
        text: "save a note".into(),
        task_id: None,
        overheard: Vec::new(),
    };
    let mut stream = client.submit_stream(&task).await.unwrap();
    // The sender lives until the turn ends: stdin stays open.
    let (typed, receiver) = unbounded_channel();
    for line in lines {
        typed.send(line.to_string()).unwrap();
    }
    let err = Captured::default();
    let mut prompt = Prompt::new(Lines::given(receiver), Box::new(err.clone()));
    let mut events = Vec::new();
    while let Some(item) = bounded(prompt.next(&client, &mut stream)).await.unwrap() {
        let StreamItem::Event { event, .. } = item else {
            continue;
        };
        bounded(prompt.event(&client, &event)).await;
        let end = matches!(event, TurnEvent::Ended { .. });
        events.push(event);
        if end {
            break;
        }
    }
    drop(typed);
    (events, err.text())
}

fn decision_of(events: &[TurnEvent]) -> Option<ApprovalDecision> {
    events.iter().find_map(|e| match e {
        TurnEvent::ApprovalDecided { decision, .. } => Some(*decision),
        _ => None,
    })
}

#[tokio::test]
async fn prompt_y_posts_an_approval_as_this_user() {
    let served = start();
    let (events, said) = prompted_task(&served, "ask", &["y"]).await;
    assert_eq!(said, "approve ap-1? [y/N] ");
    assert_eq!(decision_of(&events), Some(ApprovalDecision::Approved));
    let answered = served.stub.answered.lock().unwrap().clone();
    assert_eq!(
        answered,
        [(
            ApprovalAnswer {
                answer: OwnerAnswer::Approve,
                reason: None
            },
            Some(own_uid())
        )]
    );
}

#[tokio::test]
async fn prompt_an_empty_line_posts_a_denial_with_its_reason() {
    let served = start();
    let (events, said) = prompted_task(&served, "ask", &[""]).await;
    assert_eq!(said, "approve ap-1? [y/N] ");
    assert_eq!(decision_of(&events), Some(ApprovalDecision::Denied));
    let answered = served.stub.answered.lock().unwrap().clone();
    assert_eq!(
        answered,
        [(
            ApprovalAnswer {
                answer: OwnerAnswer::Deny,
                reason: Some(DENIED_AT_PROMPT.into())
            },
            Some(own_uid())
        )]
    );
}

#[tokio::test]
async fn prompt_decided_before_an_answer_posts_nothing() {
    let served = start();
    let (events, said) = prompted_task(&served, "ask-timeout", &[]).await;
    assert_eq!(decision_of(&events), Some(ApprovalDecision::TimedOut));
    assert!(
        said.starts_with("approve ap-1? [y/N] \nboxctl: approval ap-1 is timed out"),
        "{said}"
    );
    assert!(said.ends_with("the question is dropped\n"), "{said}");
    assert!(served.stub.answered.lock().unwrap().is_empty());
}
