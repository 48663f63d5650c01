#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The model's compaction answer against fakellama (issue 12, point 1): its sections in any
//! order, a request sized so the answer has room, and answers refused (cut at the limit, too
//! short), which leave a carry made without the model.

use crate::compact::mechanical::MECHANICAL_HEADER;
use crate::compact::owner_words::split;
use crate::tests::bed::{Bed, DUE_AFTER_TURN, kinds, script};
use bxcore::{LogRecord, TurnEnd};

/// The last note of the session's log.
fn last_note(session: &crate::session::Session) -> String {
    session
        .records()
        .iter()
        .rev()
        .find_map(|r| match r {
            LogRecord::Note { text, .. } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[test]
fn an_answer_that_starts_with_its_notes_gives_the_carry_and_the_notes() {
    let bed = Bed::new(&script(
        r###"reply = "## Notes to remember\n- the locker code is 4471\n\nThe user gave their locker code and asked about otters.""###,
    ));
    let mut session = bed.session("s");
    bed.task(&mut session, "my locker code is 4471", DUE_AFTER_TURN)
        .unwrap();
    assert_eq!(session.epoch(), 1, "{:?}", kinds(&session));
    assert_eq!(
        split(session.carry().unwrap().0).0,
        "The user gave their locker code and asked about otters."
    );
    let notes = crate::memory::list(&bed.cfg).unwrap();
    assert_eq!(notes.len(), 1);
    assert_eq!(notes[0].text, "the locker code is 4471");
}

#[test]
fn an_answer_of_notes_alone_is_the_carry() {
    // What Qwen2.5-Coder-0.5B answers (docs/real-model.md): the notes heading, then the
    // summary as a list under it, and nothing else.
    let bed = Bed::new(&script(
        r###"reply = "## Notes to remember\n\n- The user's locker code is 4471.\n- They asked about otters.""###,
    ));
    let mut session = bed.session("s");
    bed.task(&mut session, "my locker code is 4471", DUE_AFTER_TURN)
        .unwrap();
    assert_eq!(session.epoch(), 1, "{:?}", kinds(&session));
    assert_eq!(
        split(session.carry().unwrap().0).0,
        "- The user's locker code is 4471.\n- They asked about otters."
    );
    assert!(crate::memory::list(&bed.cfg).unwrap().is_empty());
}

#[test]
fn an_answer_cut_at_its_limit_is_refused() {
    let mut bed = Bed::new(&script(
        r#"reply = "The user asked about otters, then about rivers, then about the sea, at length.""#,
    ));
    bed.cfg.compact.answer_tokens = 8;
    let mut session = bed.session("s");
    bed.task(&mut session, "tell me about otters", DUE_AFTER_TURN)
        .unwrap();
    let compactions = bed.compaction_requests();
    assert_eq!(compactions.len(), 1);
    assert_eq!(
        compactions[0].body["max_tokens"], 8,
        "the answer's own limit"
    );
    assert_eq!(session.epoch(), 1, "{:?}", kinds(&session));
    let carry = session.carry().unwrap().0.to_string();
    assert!(carry.starts_with(MECHANICAL_HEADER), "{carry}");
    let note = last_note(&session);
    assert!(note.contains("cut at its limit of 8 tokens"), "{note}");
}

#[test]
fn an_answer_too_short_to_be_a_summary_is_refused() {
    // Issue 12: an answer cut to `## Notes` became the carry and the session lost everything.
    let bed = Bed::new(&script(r###"reply = "## Notes""###));
    let mut session = bed.session("s");
    bed.task(&mut session, "my locker code is 4471", DUE_AFTER_TURN)
        .unwrap();
    assert_eq!(session.epoch(), 1, "{:?}", kinds(&session));
    let carry = session.carry().unwrap().0.to_string();
    assert!(carry.starts_with(MECHANICAL_HEADER), "{carry}");
    assert!(carry.contains("my locker code is 4471"), "{carry}");
    let note = last_note(&session);
    assert!(note.contains("has 8 characters, fewer than"), "{note}");
}

#[test]
fn the_compaction_request_leaves_the_answer_room_in_the_slot() {
    // Issue 12: 4 070 prompt tokens sent to a 4 096-token slot left 26 for the summary.
    const N_CTX: u32 = 4_096;
    let mut bed = Bed::with_n_ctx(
        &script(r#"reply = "The user sent two long lists of words to keep.""#),
        N_CTX,
    );
    bed.cfg.compact.threshold = 0.8;
    // The owner's words take their share of the answer's room: `owner_words.rs` has that.
    bed.cfg.compact.owner_words_chars = 0;
    let mut session = bed.session("s");
    // About 1 800 of fakellama's tokens each: the second turn ends past the threshold, and
    // the epoch with compact.md would leave little room for an answer.
    let long = "word ".repeat(900);
    for _ in 0..2 {
        let end = bed.task(&mut session, &long, N_CTX).unwrap();
        assert_eq!(end, TurnEnd::Done);
    }
    assert_eq!(session.epoch(), 1, "{:?}", kinds(&session));
    let compactions = bed.compaction_requests();
    assert_eq!(compactions.len(), 1);
    let answer_tokens = bed.cfg.compact.answer_tokens.min(N_CTX / 4) as usize;
    assert_eq!(compactions[0].body["max_tokens"], answer_tokens);
    assert!(
        compactions[0].prompt_tokens + answer_tokens <= N_CTX as usize,
        "{} prompt tokens leave less than {answer_tokens} for the answer",
        compactions[0].prompt_tokens
    );
    assert_eq!(
        session.carry().unwrap().0,
        "The user sent two long lists of words to keep."
    );
}
