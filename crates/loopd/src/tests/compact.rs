#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Compaction into epochs against fakellama: due after a turn, on a full context (then the
//! turn runs once more), and an epoch too big for the slot. `compact_fallback.rs` has the
//! answers refused and the compaction without the model.

use crate::compact::fit::CUT_MARK;
use crate::compact::owner_words::{OWNER_WORDS_HEADING, split};
use crate::tests::bed::{Bed, COMPACT_PHRASE, DUE_AFTER_TURN, ROOMY_N_CTX, SYSTEM, kinds, script};
use crate::turn::TurnError;
use bxcore::{DataClass, Labels, LogRecord, TurnEnd};
use serde_json::Value;

/// The (role, content) of a request body's messages.
fn roles_and_contents(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The main-slot requests, in order.
fn main_bodies(bed: &Bed) -> Vec<Value> {
    bed.fake
        .server
        .requests()
        .into_iter()
        .filter(|r| r.body["id_slot"] == 0)
        .map(|r| r.body)
        .collect()
}

#[test]
fn a_turn_past_the_threshold_compacts_into_a_new_epoch_with_joined_labels() {
    let bed = Bed::new(&script("reply = \"CARRY: the user studies otters\""));
    let mut session = bed.session("s");
    let end = bed
        .task(&mut session, "fetch otters", DUE_AFTER_TURN)
        .unwrap();
    assert_eq!(end, TurnEnd::Done);
    assert_eq!(session.epoch(), 1);
    let Some(LogRecord::EpochStart {
        epoch,
        carry,
        class,
        untrusted,
        ..
    }) = session.records().last()
    else {
        panic!("no epoch start: {:?}", kinds(&session));
    };
    assert_eq!(*epoch, 1);
    assert_eq!(
        split(carry),
        (
            "CARRY: the user studies otters",
            vec!["fetch otters".into()]
        ),
        "the model's summary, then the owner's words"
    );
    assert_eq!(*class, DataClass::Private, "the fetch's class is joined in");
    assert!(*untrusted, "an untrusted fetch makes the carry untrusted");
    let compaction = bed.bodies_with(COMPACT_PHRASE);
    assert_eq!(compaction.len(), 1);
    assert_eq!(compaction[0].0["id_slot"], 1, "the background slot");
    assert!(compaction[0].0.get("tools").is_none(), "no tools");
    assert!(
        session.current_baseline().is_none(),
        "written by the next turn"
    );

    bed.fake.server.clear_requests();
    let end = bed.task(&mut session, "and now?", ROOMY_N_CTX).unwrap();
    assert_eq!(end, TurnEnd::Done);
    assert_eq!(session.current_baseline().unwrap().epoch, 1);
    assert!(
        session
            .epoch_records()
            .iter()
            .any(|r| matches!(r, LogRecord::Baseline { epoch: 1, .. }))
    );
    let messages = roles_and_contents(&main_bodies(&bed)[0]);
    assert_eq!(messages[0], ("system".into(), SYSTEM.into()));
    assert_eq!(
        messages[1],
        (
            "user".into(),
            format!(
                "Summary of the conversation so far:\nCARRY: the user studies otters\n\n\
                 {OWNER_WORDS_HEADING}\n> fetch otters"
            )
        )
    );
    assert_eq!(messages[2], ("user".into(), "and now?".into()));
    assert_eq!(messages.len(), 3, "nothing of epoch 0 is replayed");
    assert_eq!(
        crate::baseline::context_labels(&session),
        Labels::new(DataClass::Private, true),
        "the session stays untrusted in the new epoch"
    );
}

#[test]
fn the_carry_is_capped() {
    let mut bed = Bed::new(&script("reply = \"CARRY: the user studies otters\""));
    bed.cfg.compact.carry_chars = 25;
    let mut session = bed.session("s");
    bed.task(&mut session, "hello", DUE_AFTER_TURN).unwrap();
    assert_eq!(
        split(session.carry().unwrap().0).0,
        "CARRY: the user studies o",
        "the summary is capped; the owner's words have their own bound"
    );
}

#[test]
fn below_the_threshold_nothing_is_compacted() {
    let bed = Bed::new(&script("reply = \"CARRY\""));
    let mut session = bed.session("s");
    bed.task(&mut session, "hello", ROOMY_N_CTX).unwrap();
    assert_eq!(session.epoch(), 0);
    assert!(bed.bodies_with(COMPACT_PHRASE).is_empty());
}

/// A script whose first main call on "question two" finds the context full.
fn full_script(compaction_rule: &str) -> String {
    format!(
        r#"{}
[[rule]]
when_contains = "question two"
times = 1
error = {{ status = 400, type = "exceed_context_size_error", message = "the request exceeds the available context size" }}
"#,
        script(compaction_rule)
    )
}

#[test]
fn a_full_context_compacts_and_the_turn_runs_once_more_in_the_new_epoch() {
    let bed = Bed::new(&full_script("reply = \"CARRY: otters were asked about\""));
    let mut session = bed.session("s");
    bed.task(&mut session, "question one", ROOMY_N_CTX).unwrap();
    bed.fake.server.clear_requests();
    let end = bed.task(&mut session, "question two", ROOMY_N_CTX).unwrap();
    assert_eq!(end, TurnEnd::Done);
    assert_eq!(session.epoch(), 1);
    assert_eq!(
        kinds(&session),
        [
            "header",
            "user",
            "baseline",
            "assistant",
            "turn_end",
            "user",
            "epoch_start",
            "baseline",
            "assistant",
            "turn_end"
        ],
        "the request is logged once, in the old epoch"
    );
    let compaction = bed.bodies_with(COMPACT_PHRASE);
    assert_eq!(compaction.len(), 1);
    let compacted = roles_and_contents(&compaction[0].0);
    assert!(
        compacted.iter().any(|(_, c)| c == "question two"),
        "the open request is in what is compacted"
    );
    let mains = main_bodies(&bed);
    assert_eq!(mains.len(), 2, "the failed call and the retry");
    let retry = roles_and_contents(&mains[1]);
    assert_eq!(retry.len(), 3);
    assert_eq!(
        retry[1].1,
        format!(
            "Summary of the conversation so far:\nCARRY: otters were asked about\n\n\
             {OWNER_WORDS_HEADING}\n> question one"
        ),
        "the open request is re-stated, not in the owner's words yet"
    );
    assert_eq!(retry[2], ("user".into(), "question two".into()));

    // The next turn of the epoch keeps the same prefix: the re-stated request stays.
    bed.fake.server.clear_requests();
    bed.task(&mut session, "question three", ROOMY_N_CTX)
        .unwrap();
    let next = roles_and_contents(&main_bodies(&bed)[0]);
    assert_eq!(next[..3], retry[..]);
    assert_eq!(next[3].0, "assistant");
    assert_eq!(next[4], ("user".into(), "question three".into()));
}

const FAILING: &str =
    "error = { status = 400, type = \"invalid_request_error\", message = \"no compaction today\" }";

#[test]
fn a_full_context_with_nothing_else_in_the_epoch_fails_the_turn_and_keeps_every_record() {
    let bed = Bed::new(&full_script(FAILING));
    let mut session = bed.session("s");
    let result = bed.task(&mut session, "question two", ROOMY_N_CTX);
    assert!(
        matches!(result, Err(TurnError::SessionFull(_))),
        "{result:?}"
    );
    assert_eq!(session.epoch(), 0);
    assert_eq!(
        kinds(&session),
        ["header", "user", "baseline", "note", "turn_end"]
    );
    let Some(LogRecord::Note { text, .. }) = session.records().get(3) else {
        unreachable!()
    };
    assert!(text.contains("nothing to compact"), "{text}");
    assert!(
        bed.bodies_with(COMPACT_PHRASE).is_empty(),
        "nothing was asked"
    );
    assert!(matches!(
        session.records().last(),
        Some(LogRecord::TurnEnd {
            end: TurnEnd::Failed { .. },
            ..
        })
    ));
}

#[test]
fn an_epoch_too_big_for_the_slot_is_compacted_from_cut_messages() {
    let bed = Bed::new(&script("reply = \"CARRY: a very long request\""));
    let mut session = bed.session("big");
    bed.task(&mut session, "question one", ROOMY_N_CTX).unwrap();
    // About 16 000 of fakellama's tokens: more than its slot holds, so the turn compacts
    // before its call, and a compaction of the whole epoch would not fit either.
    let huge = "word ".repeat(8_000);
    let _ = bed.task(&mut session, &huge, ROOMY_N_CTX);
    assert_eq!(session.epoch(), 1, "{:?}", kinds(&session));
    // Measured before it was sent: one request, cut so that the answer has room.
    let compactions = bed.compaction_requests();
    assert_eq!(compactions.len(), 1, "cut before sending, sent once");
    let sent = compactions[0].body.to_string();
    assert!(sent.contains(CUT_MARK), "{}", &sent[..200.min(sent.len())]);
    let answer_tokens = bed.cfg.compact.answer_tokens.min(ROOMY_N_CTX / 4);
    assert!(
        compactions[0].prompt_tokens + answer_tokens as usize <= ROOMY_N_CTX as usize,
        "{} prompt tokens leave no room for {answer_tokens}",
        compactions[0].prompt_tokens
    );
    // The request itself does not fit a slot, so the turn still fails, clearly, and the log
    // keeps it.
    assert!(
        matches!(
            session.records().last(),
            Some(LogRecord::TurnEnd {
                end: TurnEnd::Failed { .. },
                ..
            })
        ),
        "{:?}",
        kinds(&session)
    );
    assert!(
        session
            .records()
            .iter()
            .any(|r| matches!(r, LogRecord::User { content, .. } if *content == huge))
    );
}

#[test]
fn a_compaction_inside_a_turn_counts_against_the_turns_budget() {
    let carry = format!("CARRY: {}", "otters ".repeat(200));
    let mut bed = Bed::new(&full_script(&format!("reply = \"{carry}\"")));
    bed.cfg.budgets.turn.max_generated_tokens_per_turn = Some(50);
    let mut session = bed.session("s");
    bed.task(&mut session, "question one", ROOMY_N_CTX).unwrap();
    let end = bed.task(&mut session, "question two", ROOMY_N_CTX).unwrap();
    assert_eq!(session.epoch(), 1, "the compaction is made whole, not cut");
    match end {
        TurnEnd::Budget { budget, message } => {
            assert_eq!(budget, crate::budget::MAX_GENERATED_TOKENS_PER_TURN);
            let generated: u64 = message
                .strip_prefix("the turn generated ")
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse().ok())
                .unwrap();
            assert!(generated > 200, "the carry's tokens are in {message}");
        }
        other => panic!("the compaction's tokens were not counted: the turn ended {other:?}"),
    }
}
