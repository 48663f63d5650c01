#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Opted-in tool summaries (seed M5d2-08): background slot, no tools, labels copied, only the
//! listed tools, once each, never replayed, and before compaction.

use crate::session::Session;
use crate::tests::bed::{Bed, DUE_AFTER_TURN, FETCHED, ROOMY_N_CTX, SUMMARY_PHRASE, kinds, script};
use bxcore::{DataClass, LogRecord, TurnEnd};

fn summaries(session: &Session) -> Vec<LogRecord> {
    session
        .records()
        .iter()
        .filter(|r| matches!(r, LogRecord::ToolSummary { .. }))
        .cloned()
        .collect()
}

#[test]
fn an_opted_in_result_is_summarised_on_the_background_slot_without_tools() {
    let bed = Bed::new(&script("reply = \"CARRY\""));
    let mut session = bed.session("s");
    let end = bed.task(&mut session, "fetch otters", ROOMY_N_CTX).unwrap();
    assert_eq!(end, TurnEnd::Done);
    let found = summaries(&session);
    assert_eq!(found.len(), 1, "{:?}", kinds(&session));
    let result_call = session.records().iter().find_map(|r| match r {
        LogRecord::ToolResult {
            call, tool_call_id, ..
        } => Some((*call, tool_call_id.clone())),
        _ => None,
    });
    let LogRecord::ToolSummary {
        call,
        tool_call_id,
        content,
        class,
        untrusted,
        ..
    } = &found[0]
    else {
        unreachable!()
    };
    assert_eq!(Some((*call, tool_call_id.clone())), result_call);
    assert_eq!(content, "SUMMARY OF OTTERS");
    assert_eq!(*class, DataClass::Private, "the result's class is copied");
    assert!(*untrusted, "the result's untrusted flag is copied");
    let requests = bed.bodies_with(SUMMARY_PHRASE);
    assert_eq!(requests.len(), 1);
    let (body, slot_used) = &requests[0];
    assert_eq!(body["id_slot"], 1, "the background slot");
    assert_eq!(*slot_used, Some(1));
    assert!(body.get("tools").is_none(), "no tools key: {body}");
    assert!(
        crate::tests::bed::last_content(body).contains(FETCHED),
        "the result is in the summary request"
    );
}

#[test]
fn a_tool_not_in_the_list_is_not_summarised() {
    let mut bed = Bed::new(&script("reply = \"CARRY\""));
    bed.cfg.compact.summarise = vec!["http_fetch".into()];
    let mut session = bed.session("s");
    bed.task(&mut session, "fetch otters", ROOMY_N_CTX).unwrap();
    assert!(summaries(&session).is_empty());
    assert!(bed.bodies_with(SUMMARY_PHRASE).is_empty());
}

#[test]
fn a_second_pass_makes_no_request_and_no_second_summary() {
    let bed = Bed::new(&script("reply = \"CARRY\""));
    let mut session = bed.session("s");
    bed.task(&mut session, "fetch otters", ROOMY_N_CTX).unwrap();
    assert_eq!(summaries(&session).len(), 1);
    bed.fake.server.clear_requests();
    bed.with_rt(ROOMY_N_CTX, |rt| {
        crate::summarise::missing(rt, &mut session).unwrap();
    });
    assert!(bed.fake.server.requests().is_empty());
    assert_eq!(summaries(&session).len(), 1);
}

#[test]
fn messages_never_replay_a_summary() {
    let mut bed = Bed::new(&script("reply = \"CARRY\""));
    bed.cfg.compact.summarise = Vec::new();
    let mut session = bed.session("s");
    bed.task(&mut session, "fetch otters", ROOMY_N_CTX).unwrap();
    assert!(summaries(&session).is_empty());
    let before = crate::baseline::messages(&session, session.current_baseline().unwrap());
    bed.cfg.compact.summarise = vec!["echo".into()];
    bed.with_rt(ROOMY_N_CTX, |rt| {
        crate::summarise::missing(rt, &mut session).unwrap();
    });
    assert_eq!(summaries(&session).len(), 1);
    let after = crate::baseline::messages(&session, session.current_baseline().unwrap());
    assert_eq!(before, after);
}

#[test]
fn summaries_come_before_compaction_and_replace_the_result_in_it() {
    let bed = Bed::new(&script("reply = \"CARRY\""));
    let mut session = bed.session("s");
    bed.task(&mut session, "fetch otters", DUE_AFTER_TURN)
        .unwrap();
    let order: Vec<&str> = kinds(&session)
        .into_iter()
        .filter(|k| *k == "tool_summary" || *k == "epoch_start")
        .collect();
    assert_eq!(order, ["tool_summary", "epoch_start"]);
    let compaction = bed.bodies_with(crate::tests::bed::COMPACT_PHRASE);
    assert_eq!(compaction.len(), 1);
    let text = compaction[0].0["messages"].to_string();
    assert!(text.contains("SUMMARY OF OTTERS"), "{text}");
    assert!(
        !text.contains(FETCHED),
        "the raw result is replaced: {text}"
    );
}

#[test]
fn a_summary_is_labelled_with_the_context_it_was_made_in() {
    let bed = Bed::new(&script("reply = \"CARRY\""));
    let mut session = bed.session("s");
    // The session holds secret data from before it read the page (here inherited): the model
    // that writes the summary reads that too, so the summary may repeat it.
    let parent = bxcore::SessionId::new("p").unwrap();
    session
        .append(LogRecord::Inherited {
            time: bxcore::Timestamp::now(),
            parent: parent.clone(),
            class: DataClass::Secret,
            untrusted: false,
            root_session: parent,
            root_turn: 1,
        })
        .unwrap();
    bed.task(&mut session, "fetch otters", ROOMY_N_CTX).unwrap();
    let found = summaries(&session);
    let LogRecord::ToolSummary {
        class, untrusted, ..
    } = &found[0]
    else {
        unreachable!()
    };
    assert_eq!(
        (*class, *untrusted),
        (DataClass::Secret, true),
        "the join of the result (private, untrusted) and the context (secret)"
    );
}
