//! The day budget in a running turn: the turn ends `budget` when the day's tokens are spent,
//! by itself or by other sessions meanwhile; its calls may generate no more than the day
//! leaves.

use super::{Bed, PAGE, Port, TestMeter, echo};
use crate::budget::MAX_GENERATED_TOKENS_PER_DAY;
use crate::tools::ToolPort;
use bxcore::TurnEnd;
use proto::{ToolRequest, ToolResponse};
use std::sync::atomic::Ordering;

#[test]
fn a_turn_may_generate_only_what_the_day_leaves_then_ends_at_the_day_budget() {
    let long = "word ".repeat(300);
    let mut bed = Bed::new(&format!("default_reply = \"{long}\""));
    bed.cfg.budgets.max_generated_tokens_per_day = Some(1000);
    bed.cfg.budgets.timezone = "Europe/Paris".into();
    let meter = TestMeter::default();
    meter.0.store(990, Ordering::SeqCst);
    let ran = bed.run("s", "talk", &Port::default(), &meter);
    let (budget, message) = ran.budget();
    assert_eq!(budget, MAX_GENERATED_TOKENS_PER_DAY);
    assert_eq!(bed.max_tokens(), vec![Some(10)]);
    assert!(
        message.starts_with(
            "1000 tokens were generated today (Europe/Paris) by all sessions; \
             max_generated_tokens_per_day is 1000; the day turns at "
        ),
        "{message}"
    );
    // The next midnight in Paris, as a timestamp with its offset.
    assert!(
        message.contains("T00:00:00+01:00") || message.contains("T00:00:00+02:00"),
        "{message}"
    );
}

/// A port that, as its call runs, has other sessions spend the rest of the day's budget.
struct SpendingPort<'a> {
    meter: &'a TestMeter,
    max: u64,
}

impl ToolPort for SpendingPort<'_> {
    fn call(&self, _request: &ToolRequest) -> ToolResponse {
        self.meter.0.store(self.max, Ordering::SeqCst);
        ToolResponse::Result {
            content: PAGE.into(),
            class: bxcore::DataClass::Public,
            untrusted: true,
            truncated: false,
        }
    }
}

#[test]
fn a_running_turn_ends_once_other_sessions_spent_the_day() {
    let script = format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "FETCH"
tool_calls = [{a}]
"#,
        a = echo("a")
    );
    let mut bed = Bed::new(&script);
    bed.cfg.budgets.max_generated_tokens_per_day = Some(5000);
    let meter = TestMeter::default();
    let port = SpendingPort {
        meter: &meter,
        max: 5000,
    };
    let ran = bed.run("s", "FETCH", &port, &meter);
    let (budget, message) = ran.budget();
    assert_eq!(budget, MAX_GENERATED_TOKENS_PER_DAY);
    assert!(
        message.starts_with("5000 tokens were generated today (UTC)"),
        "{message}"
    );
    // One model call, the call it asked for, and no second model call.
    assert_eq!(bed.fake.server.requests().len(), 1);
    // Without a meter that counts (none yet, or a test's), the turn's own tokens count.
    let mut alone = Bed::new(&format!("default_reply = \"{}\"", "word ".repeat(300)));
    alone.cfg.budgets.max_generated_tokens_per_day = Some(20);
    let ran = alone.run("s", "talk", &Port::default(), &TestMeter::default());
    assert_eq!(ran.budget().0, MAX_GENERATED_TOKENS_PER_DAY);
    assert_eq!(ran.end.unwrap(), ran_end_budget(&ran.session));
}

fn ran_end_budget(session: &crate::session::Session) -> TurnEnd {
    session
        .records()
        .iter()
        .rev()
        .find_map(|r| match r {
            bxcore::LogRecord::TurnEnd { end, .. } => Some(end.clone()),
            _ => None,
        })
        .unwrap()
}
