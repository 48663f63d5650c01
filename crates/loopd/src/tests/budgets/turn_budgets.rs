//! Each turn budget ends the turn `budget` naming the budget and the figure, and the
//! session's next task runs as usual.

use super::{Bed, Port, TURN_BOUND_SECS, TestMeter, echo};
use crate::budget::{
    MAX_GENERATED_TOKENS_PER_TURN, MAX_PROMPT_TOKENS_PER_TURN, MAX_TOOL_CALLS_PER_TURN, MAX_TURN_MS,
};
use crate::tools::ToolPort;
use bxcore::{LogRecord, ToolOutcome, TurnEnd};
use proto::{ToolRequest, ToolResponse};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

#[test]
fn the_call_past_max_tool_calls_is_not_run_and_the_next_task_runs() {
    let script = format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "FIRST"
times = 1
tool_calls = [{a}, {b}, {c}]
[[rule]]
when_contains = "SECOND"
times = 1
tool_calls = [{a}]
"#,
        a = echo("a"),
        b = echo("b"),
        c = echo("c"),
    );
    let mut bed = Bed::new(&script);
    bed.cfg.budgets.turn.max_tool_calls_per_turn = Some(2);
    let port = Port::default();
    let meter = TestMeter::default();
    let ran = bed.run("s", "FIRST", &port, &meter);
    let (budget, message) = ran.budget();
    assert_eq!(budget, MAX_TOOL_CALLS_PER_TURN);
    assert_eq!(
        message,
        "the turn asked for tool call 3; max_tool_calls_per_turn is 2"
    );
    assert_eq!(port.seen.lock().unwrap().len(), 2);
    let results = ran.results();
    assert_eq!(results.len(), 3);
    assert!(results[2].0.contains("Not run") && results[2].0.contains(&message));
    assert_eq!(results[2].1, ToolOutcome::Failed);
    // The end is in the log.
    assert!(ran.session.records().iter().any(|r| matches!(
        r,
        LogRecord::TurnEnd { end: TurnEnd::Budget { budget, .. }, .. } if budget == MAX_TOOL_CALLS_PER_TURN
    )));
    drop(ran);
    // The session goes on: its next task has a budget of its own.
    let next = bed.run("s", "SECOND", &port, &meter);
    assert_eq!(next.end.unwrap(), TurnEnd::Done);
    assert_eq!(port.seen.lock().unwrap().len(), 3);
}

#[test]
fn a_turn_stops_at_its_generated_tokens_and_an_answer_cut_there_is_no_answer() {
    let long = "word ".repeat(300);
    let script = format!(
        r#"default_reply = "short"
[[rule]]
when_contains = "LONG"
times = 1
reply = "{long}"
"#
    );
    let mut bed = Bed::new(&script);
    bed.cfg.budgets.turn.max_generated_tokens_per_turn = Some(25);
    let meter = TestMeter::default();
    let ran = bed.run("s", "LONG", &Port::default(), &meter);
    let (budget, message) = ran.budget();
    assert_eq!(budget, MAX_GENERATED_TOKENS_PER_TURN);
    assert_eq!(
        message,
        "the turn generated 25 tokens; max_generated_tokens_per_turn is 25"
    );
    assert_eq!(bed.max_tokens(), vec![Some(25)]);
    drop(ran);
    let next = bed.run("s", "again", &Port::default(), &meter);
    assert_eq!(next.end.unwrap(), TurnEnd::Done);
    assert_eq!(bed.max_tokens(), vec![Some(25), Some(25)]);
}

#[test]
fn a_turn_stops_once_its_prompts_evaluated_past_the_budget_and_runs_no_more_calls() {
    let script = format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "FETCH"
tool_calls = [{a}]
"#,
        a = echo("a")
    );
    let mut bed = Bed::new(&script);
    bed.cfg.budgets.turn.max_prompt_tokens_per_turn = Some(50);
    let port = Port::default();
    let ran = bed.run("s", "FETCH", &port, &TestMeter::default());
    let (budget, message) = ran.budget();
    assert_eq!(budget, MAX_PROMPT_TOKENS_PER_TURN);
    let evaluated = bed.fake.server.requests()[0].prompt_n;
    assert!(evaluated >= 50);
    assert_eq!(
        message,
        format!(
            "llama-server evaluated {evaluated} prompt tokens in the turn; \
             max_prompt_tokens_per_turn is 50"
        )
    );
    assert!(port.seen.lock().unwrap().is_empty(), "no call ran");
}

#[test]
fn prompt_tokens_served_from_the_cache_do_not_count() {
    let script = format!(
        r#"default_reply = "done"
[[rule]]
when_role = "user"
when_contains = "FETCH"
tool_calls = [{a}]
"#,
        a = echo("a")
    );
    let mut bed = Bed::new(&script);
    let port = Port::default();
    let meter = TestMeter::default();
    // A first turn without budgets fills the slot's cache.
    let first = bed.run("s", "FETCH one", &port, &meter);
    assert_eq!(first.end.as_ref().unwrap(), &TurnEnd::Done);
    let first_prompt = first.usages()[0].prompt_tokens;
    drop(first);
    // The second turn's prompts hold more tokens than the budget, but nearly all are cached.
    bed.cfg.budgets.turn.max_prompt_tokens_per_turn = Some(first_prompt);
    let second = bed.run("s", "FETCH two", &port, &meter);
    assert_eq!(second.end.as_ref().unwrap(), &TurnEnd::Done);
    let usages = second.usages();
    assert_eq!(usages.len(), 2);
    let whole = usages[0].prompt_tokens;
    let evaluated: u64 = usages
        .iter()
        .map(|u| u.prompt_tokens - u.cached_tokens)
        .sum();
    assert!(
        whole >= first_prompt && evaluated < first_prompt,
        "the test needs a first prompt over the budget, and prompts whose evaluated part is \
         under it: {whole} / {evaluated} / {first_prompt}"
    );
}

#[test]
fn max_turn_ms_ends_a_model_call_that_streams_on_and_on() {
    let long = "word ".repeat(2000);
    let mut bed = Bed::with(fakellama::Options {
        script: fakellama::Script::parse(&format!("default_reply = \"{long}\"")).unwrap(),
        // A chunk every 50 ms: the answer would stream for minutes.
        delay_ms: 50,
        ..Default::default()
    });
    bed.cfg.budgets.turn.max_turn_ms = Some(300);
    let started = Instant::now();
    let ran = bed.run("s", "talk", &Port::default(), &TestMeter::default());
    let (budget, message) = ran.budget();
    assert_eq!(budget, MAX_TURN_MS);
    assert!(
        message.starts_with("the turn ran for ") && message.ends_with("ms; max_turn_ms is 300"),
        "{message}"
    );
    assert!(started.elapsed() < Duration::from_secs(TURN_BOUND_SECS));
    // What had streamed is kept as a partial answer, as for any stopped call.
    assert!(
        ran.session
            .records()
            .iter()
            .any(|r| matches!(r, LogRecord::PartialAnswer { .. }))
    );
}

/// A port whose calls take until the turn gives them up (or a bound no test reaches).
struct SlowPort;

impl ToolPort for SlowPort {
    fn call(&self, _request: &ToolRequest) -> ToolResponse {
        std::thread::sleep(Duration::from_secs(TURN_BOUND_SECS * 2));
        ToolResponse::failed("too slow".to_string())
    }

    fn call_until(&self, _request: &ToolRequest, stop: &CancellationToken) -> ToolResponse {
        let deadline = Instant::now() + Duration::from_secs(TURN_BOUND_SECS * 2);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(async {
            tokio::select! {
                () = stop.cancelled() => ToolResponse::failed("given up".to_string()),
                () = tokio::time::sleep_until(deadline.into()) => ToolResponse::failed("too slow".to_string()),
            }
        })
    }
}

#[test]
fn max_turn_ms_ends_the_wait_for_a_tool_call() {
    let script = format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "FETCH"
tool_calls = [{a}]
"#,
        a = echo("a")
    );
    let mut bed = Bed::new(&script);
    bed.cfg.budgets.turn.max_turn_ms = Some(300);
    let ran = bed.run("s", "FETCH", &SlowPort, &TestMeter::default());
    assert_eq!(ran.budget().0, MAX_TURN_MS);
    assert_eq!(
        ran.results(),
        vec![("given up".to_string(), ToolOutcome::Failed)]
    );
}

#[test]
fn the_tokens_a_stopped_call_streamed_are_counted_in_the_turn_and_reported() {
    let long = "word ".repeat(2000);
    let mut bed = Bed::with(fakellama::Options {
        script: fakellama::Script::parse(&format!("default_reply = \"{long}\"")).unwrap(),
        delay_ms: 20,
        ..Default::default()
    });
    bed.cfg.budgets.turn.max_turn_ms = Some(300);
    bed.cfg.budgets.turn.max_generated_tokens_per_turn = Some(1_000_000);
    let stop = crate::turn::Stop::new();
    let ran = bed.run_with("s", "talk", &Port::default(), &TestMeter::default(), &stop);
    assert_eq!(ran.budget().0, MAX_TURN_MS);
    let chunks = ran
        .events
        .iter()
        .filter(|e| {
            matches!(
                e,
                bxcore::TurnEvent::Content { .. } | bxcore::TurnEvent::Reasoning { .. }
            )
        })
        .count() as u64;
    assert!(chunks > 0, "nothing streamed before the cut");
    // Reported as a model call without timings, one token a chunk (an estimate).
    let usages = ran.usages();
    assert_eq!(usages.len(), 1, "the stopped call is not reported");
    assert_eq!(usages[0].completion_tokens, chunks);
    // And counted in the turn's spend.
    assert_eq!(
        stop.spend().tokens_left(0),
        Some(1_000_000 - chunks),
        "the streamed tokens are not in the turn's spend"
    );
}
