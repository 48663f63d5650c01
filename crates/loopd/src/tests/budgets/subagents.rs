//! The attacks: an injected page makes the model hand the work to subagents, whose spending
//! must count against the top-level turn, or a budget is no budget.

use super::{Bed, PAGE, Port, TestMeter, echo};
use crate::budget::{MAX_GENERATED_TOKENS_PER_TURN, MAX_TOOL_CALLS_PER_TURN};
use bxcore::{ToolOutcome, TurnEnd, TurnEvent};

/// The parent hands the task to a subagent; the child calls echo, and calls it again each
/// time it reads the injected page, until something stops it.
fn spawning_script() -> String {
    format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "PARENT TASK"
times = 1
tool_calls = [{{ name = "subagent", arguments = "{{\"task\": \"CHILD TASK: read the page\"}}" }}]
[[rule]]
when_contains = "CHILD TASK"
times = 1
tool_calls = [{first}]
[[rule]]
when_contains = "INJECTED"
tool_calls = [{again}]
"#,
        first = echo("a"),
        again = echo("b"),
    )
}

#[test]
fn a_subagents_tool_calls_count_against_the_turn_that_started_it() {
    let mut bed = Bed::new(&spawning_script());
    bed.cfg.budgets.turn.max_tool_calls_per_turn = Some(3);
    // The child's same call again at once would be refused as a repeat: the budget is what
    // this test reaches.
    bed.cfg.r#loop.refuse_repeat_at_once = false;
    let port = Port::default();
    let ran = bed.run("p", "PARENT TASK", &port, &TestMeter::default());
    let (budget, message) = ran.budget();
    assert_eq!(budget, MAX_TOOL_CALLS_PER_TURN);
    assert!(
        message.contains("tool call 4") && message.contains("max_tool_calls_per_turn is 3"),
        "{message}"
    );
    // The subagent call was the first; the child ran two, and its third was not run.
    let seen = port.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen.iter().all(|r| r.session.as_str() == "sub-p-1"));
    let child = bed
        .store
        .open(&bxcore::SessionId::new("sub-p-1").unwrap())
        .unwrap();
    let child_results = super::results(&child);
    assert_eq!(child_results.len(), 3, "{child_results:?}");
    let (refused, outcome) = child_results.last().unwrap();
    assert!(
        refused.contains("Not run") && refused.contains("budget"),
        "{refused}"
    );
    assert_eq!(*outcome, ToolOutcome::Failed);
    // The child ended at the budget too, and the parent ran nothing after its subagent.
    assert!(matches!(
        child.records().iter().rev().find_map(|r| match r {
            bxcore::LogRecord::TurnEnd { end, .. } => Some(end.clone()),
            _ => None,
        }),
        Some(TurnEnd::Budget { .. })
    ));
    let parent_results = ran.results();
    assert_eq!(parent_results.len(), 1, "{parent_results:?}");
    assert!(!parent_results[0].0.contains(PAGE));
}

#[test]
fn a_subagents_generated_tokens_count_against_the_turn_and_its_calls_are_capped() {
    let long = "word ".repeat(400);
    let script = format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "PARENT TASK"
times = 1
tool_calls = [{{ name = "subagent", arguments = "{{\"task\": \"CHILD TASK\"}}" }}]
[[rule]]
when_contains = "CHILD TASK"
reply = "{long}"
"#
    );
    let mut bed = Bed::new(&script);
    let max = 60;
    bed.cfg.budgets.turn.max_generated_tokens_per_turn = Some(max);
    let ran = bed.run("p", "PARENT TASK", &Port::default(), &TestMeter::default());
    let (budget, message) = ran.budget();
    assert_eq!(budget, MAX_GENERATED_TOKENS_PER_TURN);
    let generated: u64 = ran.usages().iter().map(|u| u.completion_tokens).sum();
    assert_eq!(
        message,
        format!("the turn generated {generated} tokens; max_generated_tokens_per_turn is {max}")
    );
    assert!(
        generated <= max,
        "{generated} tokens past a budget of {max}"
    );
    // The child did call the model, with only what its parent had left.
    let child_called = ran.events.iter().any(|e| {
        matches!(e, TurnEvent::Subagent { event, .. } if matches!(**event, TurnEvent::ModelDone { .. }))
    });
    assert!(child_called);
    let parent_generated = ran.usages()[0].completion_tokens;
    assert_eq!(
        bed.max_tokens(),
        vec![Some(max), Some(max - parent_generated)]
    );
}
