//! A turn's events as the room's message, and what never reaches the room.
#![allow(clippy::unwrap_used)]

use super::*;
use bxcore::{CallId, ToolCall};

fn session() -> SessionId {
    SessionId::new("home").unwrap()
}

fn ended(class: DataClass, untrusted: bool) -> TurnEvent {
    TurnEvent::Ended {
        turn: 1,
        end: TurnEnd::Done,
        context: Labels { class, untrusted },
    }
}

fn call(name: &str, arguments: &str) -> TurnEvent {
    TurnEvent::ToolCall {
        call: CallId(1),
        tool_call: ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: arguments.into(),
        },
    }
}

#[test]
fn tool_calls_fold_to_a_line_each_before_the_answer() {
    let mut reply = Reply::default();
    reply.take(&call("read_file", "{\"path\":\"/notes/a.txt\"}"));
    reply.take(&TurnEvent::Content {
        text: "The code ".into(),
    });
    reply.take(&TurnEvent::Content {
        text: "is 4711.".into(),
    });
    assert!(!reply.ended());
    reply.take(&ended(DataClass::Private, false));
    assert!(reply.ended());
    assert_eq!(
        reply.message(&session(), DataClass::Private),
        "⚙ read_file({\"path\":\"/notes/a.txt\"})\nThe code is 4711."
    );
}

#[test]
fn an_answer_above_the_rooms_class_stays_on_the_box() {
    let mut reply = Reply::default();
    reply.take(&TurnEvent::Content {
        text: "hunter2".into(),
    });
    reply.take(&ended(DataClass::Secret, false));
    let message = reply.message(&session(), DataClass::Private);
    assert!(!message.contains("hunter2"), "{message}");
    assert!(message.contains("labelled secret"), "{message}");
    assert!(message.contains("boxctl show home"), "{message}");
}

#[test]
fn a_turn_that_did_not_end_or_ended_otherwise_says_so() {
    let reply = Reply::default();
    assert!(
        reply
            .message(&session(), DataClass::Private)
            .contains("lost track")
    );
    let mut failed = Reply::default();
    failed.take(&TurnEvent::Ended {
        turn: 1,
        end: TurnEnd::Failed {
            reason: "the model server is down".into(),
        },
        context: Labels::PUBLIC,
    });
    assert_eq!(
        failed.message(&session(), DataClass::Private),
        "(failed: the model server is down)"
    );
    let mut untrusted = Reply::default();
    untrusted.take(&TurnEvent::Content { text: "ok".into() });
    untrusted.take(&ended(DataClass::Public, true));
    assert!(
        untrusted
            .message(&session(), DataClass::Private)
            .ends_with("(made with untrusted data)")
    );
}

#[test]
fn control_characters_never_reach_the_room_and_a_long_answer_is_cut() {
    let mut reply = Reply::default();
    reply.take(&TurnEvent::Content {
        text: "a\u{1b}[31mb".into(),
    });
    reply.take(&ended(DataClass::Public, false));
    assert_eq!(reply.message(&session(), DataClass::Private), "a[31mb");
    let mut long = Reply::default();
    let text = "é".repeat(MAX_MESSAGE_BYTES);
    long.take(&TurnEvent::Content { text: text.clone() });
    long.take(&ended(DataClass::Public, false));
    let out = long.outgoing(&session(), DataClass::Private);
    assert!(out.text.len() <= MAX_MESSAGE_BYTES, "{}", out.text.len());
    assert!(
        out.text
            .ends_with("(cut; the whole answer is attached as answer.txt)")
    );
    assert_eq!(
        out.file.as_deref(),
        Some(text.as_str()),
        "the file is the whole answer"
    );
    let mut secret = Reply::default();
    secret.take(&TurnEvent::Content { text });
    secret.take(&ended(DataClass::Secret, false));
    assert_eq!(secret.outgoing(&session(), DataClass::Private).file, None);
}
