//! `[budgets]`: a budget of 0 and a bad glob are refused by key; a session's turn budgets come
//! from the first entry that matches it, with `[budgets]` for the keys it leaves out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::config::*;
use bxconfig::{ConfigError, Loader};
use std::io::Write;

fn load(text: &str) -> Result<Config, ConfigError> {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    Loader::new(f.path(), ENV_PREFIX).load_valid::<Config>()
}

/// The keys `text` is refused at, with their messages.
fn refused(text: &str) -> Vec<(String, String)> {
    match load(text).unwrap_err() {
        ConfigError::Keys { problems } => {
            problems.into_iter().map(|p| (p.key, p.message)).collect()
        }
        other => panic!("expected key problems, got {other}"),
    }
}

fn assert_refused(text: &str, key: &str, says: &str) {
    let found = refused(text);
    assert!(
        found.iter().any(|(k, m)| k == key && m.contains(says)),
        "expected {key} refused with {says:?}, got {found:?}"
    );
}

#[test]
fn every_budget_is_off_by_default_and_a_full_section_loads() {
    let cfg = load("").unwrap();
    assert_eq!(cfg.budgets, Budgets::default());
    assert!(!cfg.budgets.turn.any());
    let cfg = load(
        r#"[budgets]
timezone = "Europe/Paris"
max_generated_tokens_per_day = 100000
max_generated_tokens_per_turn = 4000
max_prompt_tokens_per_turn = 30000
max_turn_ms = 600000
max_tool_calls_per_turn = 40

[[budgets.sessions]]
match = "heartbeat"
max_turn_ms = 60000
"#,
    )
    .unwrap();
    assert_eq!(cfg.budgets.max_generated_tokens_per_day, Some(100_000));
    assert_eq!(cfg.budgets.turn.max_tool_calls_per_turn, Some(40));
    assert_eq!(cfg.budgets.sessions[0].matches, "heartbeat");
    assert_eq!(cfg.budgets.sessions[0].turn.max_turn_ms, Some(60_000));
}

#[test]
fn a_budget_of_zero_is_refused_by_key_saying_to_leave_it_out() {
    for key in [
        "max_generated_tokens_per_day",
        "max_generated_tokens_per_turn",
        "max_prompt_tokens_per_turn",
        "max_turn_ms",
        "max_tool_calls_per_turn",
    ] {
        assert_refused(
            &format!("[budgets]\n{key} = 0\n"),
            &format!("budgets.{key}"),
            "leave it out for no budget",
        );
    }
    assert_refused(
        "[[budgets.sessions]]\nmatch = \"a\"\n\n[[budgets.sessions]]\nmatch = \"task-*\"\nmax_tool_calls_per_turn = 0\n",
        "budgets.sessions[1].max_tool_calls_per_turn",
        "leave it out for no budget",
    );
}

#[test]
fn a_bad_or_empty_glob_is_named_by_its_entry() {
    let text = "[[budgets.sessions]]\nmatch = \"ok-*\"\n\n\
                [[budgets.sessions]]\nmatch = \"\"\n\n\
                [[budgets.sessions]]\nmatch = \"task-[\"\n";
    let found = refused(text);
    assert!(
        found
            .iter()
            .any(|(k, m)| k == "budgets.sessions[2].match" && m.contains("is not a glob")),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(k, m)| k == "budgets.sessions[1].match" && m.contains("must not be empty")),
        "{found:?}"
    );
    assert!(
        !found
            .iter()
            .any(|(k, _)| k.starts_with("budgets.sessions[0]")),
        "{found:?}"
    );
    // A key the entry does not know is refused too, not ignored.
    assert!(load("[[budgets.sessions]]\nmatch = \"a\"\nmax_turns = 3\n").is_err());
}

#[test]
fn the_first_matching_entry_gives_a_sessions_budgets_and_falls_back_per_key() {
    let cfg = load(
        r#"[budgets]
max_generated_tokens_per_turn = 1000
max_turn_ms = 60000

[[budgets.sessions]]
match = "report-*"
max_turn_ms = 5000
max_tool_calls_per_turn = 3

[[budgets.sessions]]
match = "report-big-*"
max_turn_ms = 900000

[[budgets.sessions]]
match = "heart?eat"
max_generated_tokens_per_turn = 50
"#,
    )
    .unwrap();
    let b = &cfg.budgets;
    // The first entry wins over a later, more specific one.
    let report = b.for_session("report-big-1");
    assert_eq!(
        report,
        TurnBudgets {
            max_generated_tokens_per_turn: Some(1000),
            max_prompt_tokens_per_turn: None,
            max_turn_ms: Some(5000),
            max_tool_calls_per_turn: Some(3),
        }
    );
    assert_eq!(
        b.for_session("heartbeat").max_generated_tokens_per_turn,
        Some(50)
    );
    assert_eq!(b.for_session("heartbeat").max_turn_ms, Some(60000));
    assert_eq!(b.for_session("chat"), b.turn);
    // A glob matches the whole id, not a part of it.
    assert_eq!(b.for_session("old-report-1"), b.turn);
}

#[test]
fn a_glob_that_does_not_parse_in_a_config_built_by_hand_matches_nothing() {
    let mut b = Budgets::default();
    b.sessions.push(SessionBudgets {
        matches: "[".into(),
        turn: TurnBudgets {
            max_turn_ms: Some(1),
            ..TurnBudgets::default()
        },
    });
    b.sessions.push(SessionBudgets {
        matches: "*".into(),
        turn: TurnBudgets {
            max_turn_ms: Some(2),
            ..TurnBudgets::default()
        },
    });
    assert_eq!(b.for_session("s").max_turn_ms, Some(2));
}
