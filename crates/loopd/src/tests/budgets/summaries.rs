//! Outside text must not buy model calls past the budgets: a fetched page's summary after a
//! turn that ended at a budget is not made, and one after a turn that ended well generates no
//! more than the day leaves.

use super::{Bed, Port, TestMeter, echo};
use crate::summarise::{FAILED_NOTE, SUMMARISE_PROMPT_FILE};
use bxcore::LogRecord;
use std::sync::atomic::Ordering;

/// A bed whose `echo` results are summarised after the turn, on `script`.
fn summarising(script: &str) -> Bed {
    let mut bed = Bed::new(script);
    std::fs::write(
        bed.state.path().join(SUMMARISE_PROMPT_FILE),
        "Summarise the tool output.",
    )
    .unwrap();
    bed.cfg.compact.summarise = vec!["echo".to_string()];
    bed
}

/// The chat requests sent on the background slot (summaries, compactions).
fn background_requests(bed: &Bed) -> Vec<serde_json::Value> {
    let slot = u64::from(bed.cfg.slots.background);
    bed.fake
        .server
        .requests()
        .into_iter()
        .filter(|r| r.body["id_slot"].as_u64() == Some(slot))
        .map(|r| r.body)
        .collect()
}

fn notes(session: &crate::session::Session) -> Vec<String> {
    session
        .records()
        .iter()
        .filter_map(|r| match r {
            LogRecord::Note { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_turn_that_ended_at_a_budget_gets_no_summary_of_what_it_fetched() {
    let mut bed = summarising(&format!(
        r#"default_reply = "summary of the page"
[[rule]]
when_contains = "FETCH"
tool_calls = [{a}, {a}]
"#,
        a = echo("a")
    ));
    bed.cfg.budgets.turn.max_tool_calls_per_turn = Some(1);
    let ran = bed.run("s", "FETCH", &Port::default(), &TestMeter::default());
    let (budget, _) = ran.budget();
    assert_eq!(budget, crate::budget::MAX_TOOL_CALLS_PER_TURN);
    assert!(
        background_requests(&bed).is_empty(),
        "a summary was asked for after a turn that ended at its budget"
    );
    let notes = notes(&ran.session);
    assert!(
        notes.iter().any(|n| n.starts_with(FAILED_NOTE)
            && n.contains("not tried: the turn ended at its budget max_tool_calls_per_turn")),
        "{notes:?}"
    );
    assert!(
        !ran.session
            .records()
            .iter()
            .any(|r| matches!(r, LogRecord::ToolSummary { .. }))
    );
}

#[test]
fn a_summary_generates_no_more_than_the_day_leaves_and_none_once_it_is_spent() {
    let script = format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "FETCH"
times = 1
tool_calls = [{a}, {a}]
"#,
        a = echo("a")
    );
    // Other sessions spent all but 7 tokens of the day once the turn ended.
    let mut bed = summarising(&script);
    bed.cfg.compact.summarise = Vec::new();
    bed.cfg.budgets.max_generated_tokens_per_day = Some(1000);
    let meter = TestMeter::default();
    let mut ran = bed.run("s", "FETCH", &Port::default(), &meter);
    assert_eq!(ran.end.as_ref().unwrap(), &bxcore::TurnEnd::Done);
    bed.cfg.compact.summarise = vec!["echo".to_string()];
    meter.0.store(993, Ordering::SeqCst);
    finish(&bed, &mut ran, &meter);
    let background = background_requests(&bed);
    assert!(!background.is_empty(), "no summary was asked for");
    assert!(
        background
            .iter()
            .all(|b| b["max_tokens"].as_u64() == Some(7)),
        "a summary may generate only what the day leaves: {background:?}"
    );

    // The day spent once the turn ended: no summary call at all, and each result says why it
    // stays whole.
    let mut bed = summarising(&script);
    bed.cfg.compact.summarise = Vec::new();
    bed.cfg.budgets.max_generated_tokens_per_day = Some(1000);
    let meter = TestMeter::default();
    let mut ran = bed.run("s", "FETCH", &Port::default(), &meter);
    assert_eq!(ran.end.as_ref().unwrap(), &bxcore::TurnEnd::Done);
    bed.cfg.compact.summarise = vec!["echo".to_string()];
    meter.0.store(1000, Ordering::SeqCst);
    finish(&bed, &mut ran, &meter);
    assert!(background_requests(&bed).is_empty());
    let notes = notes(&ran.session);
    assert_eq!(
        notes
            .iter()
            .filter(|n| n.starts_with(FAILED_NOTE) && n.contains("the day's budget is spent"))
            .count(),
        2,
        "{notes:?}"
    );
}

/// The background work after `ran`'s turn, counted by `meter`.
fn finish(bed: &Bed, ran: &mut super::Ran, meter: &TestMeter) {
    let blocking = bed.fake.blocking();
    let client = bed.fake.client();
    let registry = crate::tools::Registry::m2b();
    let rt = crate::turn::Runtime {
        cfg: &bed.cfg,
        models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
        blocking: &blocking,
        port: &Port::default(),
        registry: &registry,
        system: "You are the parent.",
        n_ctx: fakellama::DEFAULT_N_CTX,
        children: &crate::subagent::Subagents,
        owner: &crate::turn::NoOwner,
        meter,
    };
    let end = Ok(ran.end.as_ref().unwrap().clone());
    crate::turn::finish_turn(&rt, &mut ran.session, &end);
}

#[test]
fn a_compaction_generates_no_more_than_the_day_leaves_and_is_made_without_the_model_once_it_is_spent()
 {
    let script = format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "FETCH"
times = 2
tool_calls = [{a}]
"#,
        a = echo("a")
    );
    let bed = Bed::new(&script);
    std::fs::write(
        bed.state.path().join(crate::compact::COMPACT_PROMPT_FILE),
        "Summarise the conversation.",
    )
    .unwrap();
    let meter = TestMeter::default();
    let mut bed = bed;
    bed.cfg.budgets.max_generated_tokens_per_day = Some(1000);
    let mut ran = bed.run("s", "FETCH", &Port::default(), &meter);
    assert_eq!(ran.end.as_ref().unwrap(), &bxcore::TurnEnd::Done);

    meter.0.store(995, Ordering::SeqCst);
    compact(&bed, &mut ran, &meter);
    let background = background_requests(&bed);
    assert_eq!(background.len(), 1, "{background:?}");
    assert_eq!(background[0]["max_tokens"].as_u64(), Some(5));

    meter.0.store(0, Ordering::SeqCst);
    let mut ran = bed.run("t", "FETCH then done", &Port::default(), &meter);
    bed.fake.server.clear_requests();
    meter.0.store(1000, Ordering::SeqCst);
    let done = compact(&bed, &mut ran, &meter);
    assert!(
        background_requests(&bed).is_empty(),
        "a compaction asked the model with the day spent"
    );
    let failure = done.model_failure.unwrap();
    assert!(failure.contains("the day's budget is spent"), "{failure}");
    assert_eq!(ran.session.epoch(), 1, "the session goes on in a new epoch");
}

/// A compaction of `ran`'s session, counted by `meter`.
fn compact(bed: &Bed, ran: &mut super::Ran, meter: &TestMeter) -> crate::compact::Compacted {
    let blocking = bed.fake.blocking();
    let client = bed.fake.client();
    let registry = crate::tools::Registry::m2b();
    let rt = crate::turn::Runtime {
        cfg: &bed.cfg,
        models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
        blocking: &blocking,
        port: &Port::default(),
        registry: &registry,
        system: "You are the parent.",
        n_ctx: fakellama::DEFAULT_N_CTX,
        children: &crate::subagent::Subagents,
        owner: &crate::turn::NoOwner,
        meter,
    };
    crate::compact::compact_session(&mut ran.session, &rt).unwrap()
}
