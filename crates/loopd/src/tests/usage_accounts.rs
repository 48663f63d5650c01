#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The meter through a real engine over fakellama: what two tasks spent, in the accounts and
//! in the metrics, matches what their turns' records say; it survives a restart; the queue,
//! refusals, compactions and today's status show; the exposition passes promtool.

use crate::api::{ApiFailure, Backend, UsageQuery};
use crate::engine::Engine;
use crate::meter::{Clock, Meter, promtool};
use crate::tests::bed::{Bed, COMPACT_PHRASE, until};
use bxcore::{LogRecord, SessionId, TurnEvent};
use chrono::{DateTime, Utc};
use proto::api::{TaskRequest, UsageTotals};
use std::sync::Arc;
use std::time::Duration;

/// The longest the test waits for anything.
const WAIT: Duration = Duration::from_secs(20);
/// The day the tests run on (the meter's clock is fixed).
const NOW: &str = "2026-12-01T12:00:00Z";

/// Tasks with "gadgets" call `clock` and `echo` (through `call_tool`); "slow" answers after a
/// long while (it is stopped at shutdown); compactions answer a carry; the rest `done`.
fn script() -> String {
    format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "{COMPACT_PHRASE}"
reply = "CARRY: two tasks that used tools"
[[rule]]
when_role = "user"
when_contains = "slow"
delay_ms = 60000
reply = "late"
[[rule]]
when_role = "user"
when_contains = "gadgets"
tool_calls = [
  {{ name = "clock", arguments = "{{}}" }},
  {{ name = "call_tool", arguments = "{{\"name\":\"echo\",\"arguments\":{{\"text\":\"hi\"}}}}" }},
]
"#
    )
}

fn fixed_clock() -> Clock {
    let now: DateTime<Utc> = NOW.parse().unwrap();
    Arc::new(move || now)
}

fn id(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn task(session: &str, text: &str) -> TaskRequest {
    TaskRequest {
        session: Some(id(session)),
        text: text.into(),
        task_id: None,
        overheard: Vec::new(),
    }
}

/// Submits `text` on `session` and waits for its turn (and the work after it) to end.
async fn run_task(engine: &Engine, session: &str, text: &str) {
    let mut submitted = engine.submit(task(session, text)).await.unwrap();
    loop {
        let event = tokio::time::timeout(WAIT, submitted.events.recv())
            .await
            .expect("the turn ended in time");
        match event {
            Some(TurnEvent::Ended { .. }) => {}
            Some(_) => continue,
            None => return,
        }
    }
}

/// The classic exposition the engine answers `GET /metrics` with.
fn scrape(engine: &Engine) -> String {
    bxmetrics::scrape(&*engine.metrics(), None).unwrap().body
}

fn has_line(text: &str, line: &str) {
    assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
}

/// What the sessions' logs say their turns used.
fn logged(bed: &Bed, sessions: &[&str]) -> UsageTotals {
    let mut totals = UsageTotals::default();
    for session in sessions {
        for record in bed.store.read(&id(session)).unwrap() {
            match record {
                LogRecord::Assistant {
                    usage: Some(usage), ..
                } => {
                    totals.model_calls += 1;
                    totals.evaluated_tokens += usage.prompt_tokens - usage.cached_tokens;
                    totals.cached_tokens += usage.cached_tokens;
                    totals.generated_tokens += usage.completion_tokens;
                }
                LogRecord::ToolResult { .. } => totals.tool_calls += 1,
                LogRecord::TurnEnd { .. } => totals.turns += 1,
                _ => {}
            }
        }
    }
    totals
}

#[test]
fn two_tasks_count_what_their_turns_used_and_the_counts_survive_a_restart() {
    let mut bed = Bed::new(&script());
    // No summaries: what is counted is exactly the turns'.
    bed.cfg.compact.summarise.clear();
    let meter = Arc::new(Meter::load(&bed.cfg, fixed_clock()).unwrap());
    let engine = bed.engine(&meter);
    bed.fake.rt.block_on(async {
        run_task(&engine, "a", "use the gadgets").await;
        run_task(&engine, "b", "use the gadgets").await;
        engine.shutdown(20_000).await;
    });
    let expected = logged(&bed, &["a", "b"]);
    assert_eq!(
        (expected.turns, expected.model_calls, expected.tool_calls),
        (2, 4, 4)
    );
    let today = engine.usage(&UsageQuery::default()).unwrap();
    let mut counted = today.totals;
    assert!(counted.model_ms > 0);
    counted.model_ms = 0;
    assert_eq!(counted, expected);
    assert_eq!(today.day.as_deref(), Some("2026-12-01"));
    assert_eq!(today.sessions.len(), 2);

    let text = scrape(&engine);
    for line in [
        "loopd_turns_total{outcome=\"done\"} 2".to_string(),
        "loopd_turn_duration_seconds_count 2".into(),
        "loopd_model_calls_total{role=\"main\"} 4".into(),
        format!(
            "loopd_prompt_evaluated_tokens_total{{role=\"main\"}} {}",
            expected.evaluated_tokens
        ),
        format!(
            "loopd_prompt_cached_tokens_total{{role=\"main\"}} {}",
            expected.cached_tokens
        ),
        format!(
            "loopd_generated_tokens_total{{role=\"main\"}} {}",
            expected.generated_tokens
        ),
        "loopd_tool_calls_total{tool=\"clock\",outcome=\"ok\"} 2".into(),
        "loopd_tool_calls_total{tool=\"echo\",outcome=\"ok\"} 2".into(),
        "loopd_running_turns 0".into(),
    ] {
        has_line(&text, &line);
    }
    promtool::check(&text);

    // A new loopd reads the same accounts back.
    let again = Meter::load(&bed.cfg, fixed_clock()).unwrap();
    assert_eq!(again.report(None, None), today);
    assert_eq!(again.generated_today(), expected.generated_tokens);
}

#[test]
fn the_queue_and_refused_tasks_show_in_the_metrics() {
    let mut bed = Bed::new(&script());
    bed.cfg.api.session_queue_len = 1;
    bed.cfg.api.max_waiting_tasks = 2;
    let meter = Arc::new(Meter::load(&bed.cfg, fixed_clock()).unwrap());
    let engine = bed.engine(&meter);
    let text = bed.fake.rt.block_on(async {
        let _running = engine.submit(task("a", "slow")).await.unwrap();
        // Queued behind it, holding a waiting place until it starts.
        let queued = tokio::spawn({
            let engine = engine.clone();
            async move { engine.submit(task("a", "after")).await.map(|_| ()) }
        });
        // Queued, and the first task's turn begun (it no longer holds a waiting place): else
        // the next submission could meet the cap on waiting tasks before the full queue.
        until("the second task is queued and the first one runs", || {
            let queued = engine
                .sessions()
                .unwrap()
                .sessions
                .iter()
                .any(|s| s.id.as_str() == "a" && s.queued == 1);
            queued && scrape(&engine).contains("loopd_waiting_tasks 1\n")
        })
        .await;
        let busy = engine.submit(task("a", "one more")).await;
        assert!(matches!(busy, Err(ApiFailure::Busy(_))), "{busy:?}");
        // Waits for the main slot, holding the second waiting place.
        let waiting = tokio::spawn({
            let engine = engine.clone();
            async move { engine.submit(task("b", "other")).await.map(|_| ()) }
        });
        until("two tasks wait", || {
            scrape(&engine).contains("loopd_waiting_tasks 2")
        })
        .await;
        let refused = engine.submit(task("c", "too many")).await;
        assert!(
            matches!(refused, Err(ApiFailure::TooManyWaiting(_))),
            "{refused:?}"
        );
        let text = scrape(&engine);
        engine.shutdown(20_000).await;
        let _ = queued.await;
        let _ = waiting.await;
        text
    });
    for line in [
        // `a`'s turn, and `b`'s waiting for the main slot: as `boxctl status` counts them.
        "loopd_running_turns 2",
        "loopd_queued_tasks 1",
        "loopd_waiting_tasks 2",
        "loopd_approvals_pending 0",
        "loopd_tasks_refused_total{reason=\"busy\"} 1",
        "loopd_tasks_refused_total{reason=\"too_many_waiting\"} 1",
        "loopd_tasks_refused_total{reason=\"day_budget\"} 0",
    ] {
        has_line(&text, line);
    }
    promtool::check(&text);
}

#[test]
fn a_summary_and_a_compaction_and_their_model_calls_are_counted_and_written() {
    let bed = Bed::new(&script());
    let meter = Arc::new(Meter::load(&bed.cfg, fixed_clock()).unwrap());
    let engine = bed.engine(&meter);
    bed.fake.rt.block_on(async {
        // `echo`'s result is summarised after the turn (the bed's `[compact] summarise`); the
        // compaction waits on the lane behind that.
        run_task(&engine, "s", "use the gadgets").await;
        engine.compact(&id("s")).await.unwrap();
        engine.shutdown(20_000).await;
    });
    let text = scrape(&engine);
    has_line(&text, "loopd_compactions_total{outcome=\"ok\"} 1");
    has_line(&text, "loopd_compaction_duration_seconds_count 1");
    has_line(&text, "loopd_summaries_total{outcome=\"ok\"} 1");
    has_line(&text, "loopd_summarise_duration_seconds_count 1");
    has_line(&text, "loopd_model_calls_total{role=\"background\"} 2");
    // Read back by a new meter: written after the background work too. The turn's two calls,
    // the summary's and the compaction's.
    let after = Meter::load(&bed.cfg, fixed_clock()).unwrap();
    let totals = after.report(Some(&id("s")), None).totals;
    assert_eq!((totals.model_calls, totals.turns), (4, 1));
    assert_eq!(totals, meter.report(Some(&id("s")), None).totals);
}

#[test]
fn status_shows_today_and_the_day_budget_and_usage_knows_its_sessions() {
    let mut bed = Bed::new(&script());
    bed.cfg.budgets.max_generated_tokens_per_day = Some(5_000);
    bed.cfg.budgets.timezone = "Asia/Tokyo".into();
    let meter = Arc::new(Meter::load(&bed.cfg, fixed_clock()).unwrap());
    let engine = bed.engine(&meter);
    drop(bed.made("idle"));
    let status = bed.fake.rt.block_on(async {
        run_task(&engine, "a", "hello").await;
        let status = engine.status().await;
        engine.shutdown(20_000).await;
        status
    });
    let usage = status.usage;
    // 12:00 UTC is 21:00 in Tokyo: still the first.
    assert_eq!(
        (usage.day.as_str(), usage.timezone.as_str()),
        ("2026-12-01", "Asia/Tokyo")
    );
    assert_eq!(usage.max_generated_tokens_per_day, Some(5_000));
    assert_eq!(usage.totals.turns, 1);
    assert_eq!(usage.totals.generated_tokens, meter.generated_today());

    let idle = UsageQuery {
        session: Some(id("idle")),
        day: None,
    };
    assert_eq!(engine.usage(&idle).unwrap().totals, UsageTotals::default());
    let nobody = UsageQuery {
        session: Some(id("nobody")),
        day: None,
    };
    assert!(matches!(
        engine.usage(&nobody),
        Err(ApiFailure::NotFound(_))
    ));
}

#[test]
fn a_clean_stop_writes_the_spending_a_failed_write_after_a_turn_left() {
    let bed = Bed::new(&script());
    let meter = Arc::new(Meter::load(&bed.cfg, fixed_clock()).unwrap());
    let engine = bed.engine(&meter);
    // The writes after the turn fail: the accounts' directory is a file meanwhile.
    let usage = bed.cfg.state_dir.join(crate::meter::store::USAGE_DIR);
    std::fs::remove_dir_all(&usage).unwrap();
    std::fs::write(&usage, "not a directory").unwrap();
    bed.fake.rt.block_on(async {
        run_task(&engine, "a", "hello").await;
        until("the turn and the work after it ended", || {
            !engine
                .sessions()
                .unwrap()
                .sessions
                .iter()
                .any(|s| s.id.as_str() == "a" && s.busy)
        })
        .await;
    });
    std::fs::remove_file(&usage).unwrap();
    std::fs::create_dir(&usage).unwrap();
    bed.fake.rt.block_on(engine.shutdown(20_000));
    let spent = meter.report(None, None);
    assert!(spent.totals.generated_tokens > 0, "{spent:?}");
    let again = Meter::load(&bed.cfg, fixed_clock()).unwrap();
    assert_eq!(
        again.report(None, None),
        spent,
        "what was spent is not in the file after a clean stop"
    );
}
