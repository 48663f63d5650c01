//! The budgets' arithmetic: evaluated tokens, the day and when it turns, and what reaching a
//! budget does to the shared spend and its token.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::day::{day_turns, refusal};
use super::*;
use crate::llama::Timings;
use bxcore::Usage;
use chrono::{DateTime, TimeZone};

fn completion(usage: Usage, timings: Option<Timings>) -> Completion {
    Completion {
        content: None,
        reasoning: None,
        tool_calls: Vec::new(),
        finish_reason: "stop".into(),
        usage,
        timings,
    }
}

#[test]
fn evaluated_tokens_are_llama_servers_prompt_n_or_the_prompt_less_the_cache() {
    let usage = Usage {
        prompt_tokens: 1000,
        completion_tokens: 30,
        cached_tokens: 900,
    };
    assert_eq!(
        ModelSpend::of(&completion(usage, None)),
        ModelSpend {
            generated: 30,
            evaluated: 100
        }
    );
    let timings = Timings {
        cache_n: 880,
        prompt_n: 120,
        predicted_n: 31,
        ..Timings::default()
    };
    assert_eq!(
        ModelSpend::of(&completion(usage, Some(timings))),
        ModelSpend {
            generated: 31,
            evaluated: 120
        }
    );
}

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

#[test]
fn the_day_turns_at_the_next_midnight_of_the_zone() {
    let now = utc("2025-03-10T22:30:00Z");
    assert_eq!(
        day_turns(&Zone::utc(), now).to_rfc3339(),
        "2025-03-11T00:00:00+00:00"
    );
    // Already the 11th in Tokyo (07:30).
    assert_eq!(
        day_turns(&Zone::named("Asia/Tokyo").unwrap(), now).to_rfc3339(),
        "2025-03-12T00:00:00+09:00"
    );
    // Summer time begins at 00:00 in Santiago on 2024-09-08: that midnight does not exist,
    // the day turns at the first local time that does.
    let santiago = Zone::named("America/Santiago").unwrap();
    let turns = day_turns(&santiago, utc("2024-09-07T12:00:00Z"));
    assert_eq!(turns.to_rfc3339(), "2024-09-08T01:00:00-03:00");
    assert_eq!(
        day::day_of(&santiago, turns.with_timezone(&Utc)),
        chrono::NaiveDate::from_ymd_opt(2024, 9, 8).unwrap()
    );
}

#[test]
fn a_new_task_is_refused_once_the_days_tokens_reach_the_budget() {
    let mut budgets = Budgets::default();
    let now = Zone::utc()
        .with_ymd_and_hms(2025, 6, 1, 15, 0, 0)
        .unwrap()
        .with_timezone(&Utc);
    assert_eq!(
        refusal(&budgets, u64::MAX, now),
        None,
        "no budget, no refusal"
    );
    budgets.max_generated_tokens_per_day = Some(1000);
    assert_eq!(refusal(&budgets, 999, now), None);
    assert_eq!(
        refusal(&budgets, 1000, now).unwrap(),
        "the day's budget is spent: 1000 tokens were generated today (UTC) by all sessions; \
         max_generated_tokens_per_day is 1000; the day turns at 2025-06-02T00:00:00+00:00; \
         new tasks are refused until then"
    );
}

fn armed(turn: TurnBudgets, day: Option<u64>) -> (Arc<Spend>, CancellationToken) {
    let root = CancellationToken::new();
    let spend = Arc::new(Spend::new(root.clone()));
    let budgets = Budgets {
        max_generated_tokens_per_day: day,
        turn,
        ..Budgets::default()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    assert!(
        spend.begin(&budgets, "s", 0, runtime.handle()).is_none(),
        "no max_turn_ms, no timer"
    );
    (spend, root)
}

#[test]
fn reaching_a_budget_stops_the_turn_once_and_keeps_the_first_reason() {
    let (spend, root) = armed(
        TurnBudgets {
            max_generated_tokens_per_turn: Some(100),
            max_tool_calls_per_turn: Some(1),
            ..TurnBudgets::default()
        },
        None,
    );
    assert_eq!(spend.tokens_left(0), Some(100));
    spend.model_call(
        ModelSpend {
            generated: 60,
            evaluated: 5,
        },
        0,
    );
    assert_eq!(spend.tokens_left(0), Some(40));
    assert!(!root.is_cancelled());
    assert_eq!(spend.tool_call(), Ok(()));
    let why = spend.tool_call().unwrap_err();
    assert!(
        why.contains("tool call 2; max_tool_calls_per_turn is 1"),
        "{why}"
    );
    assert!(root.is_cancelled());
    // A later budget does not rewrite why the turn ended.
    spend.model_call(
        ModelSpend {
            generated: 60,
            evaluated: 5,
        },
        0,
    );
    assert_eq!(spend.reached().unwrap().budget, MAX_TOOL_CALLS_PER_TURN);
}

#[test]
fn a_turn_stopped_for_another_reason_does_not_end_at_a_budget() {
    let (spend, root) = armed(
        TurnBudgets {
            max_generated_tokens_per_turn: Some(10),
            ..TurnBudgets::default()
        },
        None,
    );
    root.cancel();
    spend.model_call(
        ModelSpend {
            generated: 20,
            evaluated: 0,
        },
        0,
    );
    assert_eq!(spend.reached(), None, "a cancelled turn stays cancelled");
}

#[test]
fn the_day_budget_leaves_the_least_of_the_day_and_the_turn_and_counts_the_turn_itself() {
    let (spend, root) = armed(
        TurnBudgets {
            max_generated_tokens_per_turn: Some(500),
            ..TurnBudgets::default()
        },
        Some(1000),
    );
    assert_eq!(spend.tokens_left(700), Some(300));
    assert_eq!(spend.tokens_left(0), Some(500));
    // A meter that has not counted the turn yet: its own 400 tokens count on top of what
    // the day had when it began (0 here).
    spend.model_call(
        ModelSpend {
            generated: 400,
            evaluated: 0,
        },
        0,
    );
    assert_eq!(spend.tokens_left(0), Some(100));
    assert_eq!(spend.tokens_left(950), Some(50));
    assert!(!root.is_cancelled());
    assert_eq!(spend.tokens_left(1000), Some(0));
    assert!(root.is_cancelled());
    assert_eq!(
        spend.reached().unwrap().budget,
        MAX_GENERATED_TOKENS_PER_DAY
    );
}

#[test]
fn without_budgets_nothing_is_capped_and_nothing_stops() {
    let (spend, root) = armed(TurnBudgets::default(), None);
    assert_eq!(spend.tokens_left(u64::MAX), None);
    for _ in 0..1000 {
        assert_eq!(spend.tool_call(), Ok(()));
    }
    spend.model_call(
        ModelSpend {
            generated: u64::MAX,
            evaluated: u64::MAX,
        },
        u64::MAX,
    );
    assert!(!root.is_cancelled());
    assert_eq!(spend.reached(), None);
}
