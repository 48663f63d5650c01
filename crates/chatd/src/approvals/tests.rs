//! What counts as an answer to a posted call, and what a post shows.
#![allow(clippy::unwrap_used)]

use super::*;
use bxcore::{ApprovalId, CallId, SessionId, Timestamp};

fn pending(class: DataClass) -> PendingApproval {
    PendingApproval {
        id: ApprovalId::new("ap-7").unwrap(),
        session: SessionId::new("home").unwrap(),
        turn: 1,
        call: CallId(3),
        tool: "write_file".into(),
        arguments: "{\"path\":\"/notes/\u{202e}txt.a\",\"content\":\"x\"}".into(),
        reason: "grant asks: always".into(),
        class,
        untrusted: true,
        asked: Timestamp::now(),
        timeout_ms: 60_000,
    }
}

#[test]
fn a_reply_approves_or_denies_with_a_reason_and_nothing_else_counts() {
    assert_eq!(answer_in_reply("approve"), Some(ChatAnswer::Approve));
    assert_eq!(answer_in_reply("  Approve \n"), Some(ChatAnswer::Approve));
    assert_eq!(
        answer_in_reply("> <@box:hs> Approval needed (ap-7)\n\napprove"),
        Some(ChatAnswer::Approve)
    );
    assert_eq!(answer_in_reply("deny"), Some(ChatAnswer::Deny(None)));
    assert_eq!(
        answer_in_reply("deny not into that folder"),
        Some(ChatAnswer::Deny(Some("not into that folder".into())))
    );
    assert_eq!(answer_in_reply("approve it later maybe"), None);
    assert_eq!(answer_in_reply("what is this?"), None);
    assert_eq!(answer_in_reply(""), None);
    let long = format!("deny {}", "é".repeat(MAX_DENY_REASON_BYTES));
    let Some(ChatAnswer::Deny(Some(reason))) = answer_in_reply(&long) else {
        panic!("a long denial is a denial");
    };
    assert!(reason.len() <= MAX_DENY_REASON_BYTES);
}

#[test]
fn a_reaction_approves_or_denies() {
    assert_eq!(answer_in_reaction("👍"), Some(ChatAnswer::Approve));
    assert_eq!(answer_in_reaction("👎"), Some(ChatAnswer::Deny(None)));
    assert_eq!(answer_in_reaction("🎉"), None);
    assert_eq!(ChatAnswer::Approve.to_api().answer, OwnerAnswer::Approve);
    let deny = ChatAnswer::Deny(Some("no".into())).to_api();
    assert_eq!(
        (deny.answer, deny.reason.as_deref()),
        (OwnerAnswer::Deny, Some("no"))
    );
}

#[test]
fn a_post_shows_the_call_whole_with_hidden_characters_written_out() {
    let text = request_text(&pending(DataClass::Private), DataClass::Private);
    assert!(
        text.contains("Approval needed (ap-7): write_file"),
        "{text}"
    );
    assert!(
        text.contains("\\u{202e}"),
        "the bidi override is shown: {text}"
    );
    assert!(!text.contains('\u{202e}'), "{text}");
    assert!(text.contains("untrusted data"), "{text}");
    assert!(
        text.contains("approve") && text.contains("deny <reason>"),
        "{text}"
    );
}

#[test]
fn a_call_of_a_session_above_the_rooms_class_is_not_shown() {
    let text = request_text(&pending(DataClass::Secret), DataClass::Private);
    assert!(!text.contains("txt.a"), "{text}");
    assert!(text.contains("boxctl approvals"), "{text}");
}
