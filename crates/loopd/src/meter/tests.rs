#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::runtime::Meter as _;
use crate::tools::Registry;
use bxcore::{CallId, DataClass, ModelTimings, ToolCall, ToolOutcome, TurnEnd, TurnEvent, Usage};

/// A clock the test sets, starting at `start`.
struct TestClock(Arc<Mutex<DateTime<Utc>>>);

impl TestClock {
    fn at(start: &str) -> TestClock {
        TestClock(Arc::new(Mutex::new(start.parse().unwrap())))
    }

    fn set(&self, t: &str) {
        *self.0.lock().unwrap() = t.parse().unwrap();
    }

    fn clock(&self) -> Clock {
        let now = Arc::clone(&self.0);
        Arc::new(move || *now.lock().unwrap())
    }
}

fn cfg(state: &std::path::Path, timezone: &str) -> Config {
    let mut cfg = Config {
        state_dir: state.to_path_buf(),
        ..Config::default()
    };
    cfg.budgets.timezone = timezone.into();
    cfg
}

fn id(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

fn model_done(prompt: u64, cached: u64, generated: u64) -> TurnEvent {
    TurnEvent::ModelDone {
        usage: Usage {
            prompt_tokens: prompt,
            completion_tokens: generated,
            cached_tokens: cached,
        },
        model_us: 250_000,
        timings: Some(ModelTimings {
            cache_n: cached,
            prompt_n: prompt - cached,
            prompt_ms: 1.0,
            predicted_n: generated,
            predicted_ms: 100.0,
        }),
    }
}

fn call(n: u64, name: &str, arguments: &str) -> TurnEvent {
    TurnEvent::ToolCall {
        call: CallId(n),
        tool_call: ToolCall {
            id: format!("c{n}"),
            name: name.into(),
            arguments: arguments.into(),
        },
    }
}

fn result(n: u64) -> TurnEvent {
    TurnEvent::ToolResult {
        call: CallId(n),
        outcome: ToolOutcome::Ok,
        class: DataClass::Public,
        untrusted: false,
        truncated: false,
        bytes: 3,
    }
}

fn started(session: &str) -> TurnEvent {
    TurnEvent::Started {
        session: id(session),
        turn: 1,
    }
}

fn ended() -> TurnEvent {
    TurnEvent::Ended {
        turn: 1,
        end: TurnEnd::Done,
        context: Default::default(),
    }
}

/// One turn of `session`: a model call, a `clock` call, a model call, the end.
fn one_turn(meter: &Meter, session: &str, generated: u64) {
    let registry = Registry::m2b();
    let task = meter.task(id(session), &registry);
    let mut tally = task.tally();
    for event in [
        started(session),
        model_done(100, 0, generated),
        call(1, "clock", "{}"),
        result(1),
        model_done(120, 100, 1),
        ended(),
    ] {
        tally.event(&event);
    }
}

fn text(meter: &Meter) -> String {
    bxmetrics::exposition::classic(&meter.open_metrics(Sampled::default()).unwrap())
}

#[test]
fn a_turns_events_fill_the_account_and_the_metrics() {
    let state = tempfile::tempdir().unwrap();
    let clock = TestClock::at("2026-12-01T10:00:00Z");
    let meter = Meter::load(&cfg(state.path(), "UTC"), clock.clock()).unwrap();
    one_turn(&meter, "a", 7);
    let report = meter.report(Some(&id("a")), None);
    assert_eq!(
        report.totals,
        UsageTotals {
            turns: 1,
            model_calls: 2,
            evaluated_tokens: 120,
            cached_tokens: 100,
            generated_tokens: 8,
            model_ms: 500,
            tool_calls: 1,
        }
    );
    let text = text(&meter);
    for line in [
        "loopd_turns_total{outcome=\"done\"} 1",
        "loopd_model_calls_total{role=\"main\"} 2",
        "loopd_generated_tokens_total{role=\"main\"} 8",
        "loopd_tool_calls_total{tool=\"clock\",outcome=\"ok\"} 1",
        // Two calls of 100 ms each: the speed is their rate over this one's.
        "loopd_generation_tokens_total{role=\"main\"} 8",
        "loopd_generation_seconds_total{role=\"main\"} 0.2",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
}

#[test]
fn generated_today_counts_a_model_call_as_soon_as_its_event_is_seen() {
    let state = tempfile::tempdir().unwrap();
    let clock = TestClock::at("2026-12-01T10:00:00Z");
    let meter = Meter::load(&cfg(state.path(), "UTC"), clock.clock()).unwrap();
    let registry = Registry::m2b();
    let task = meter.task(id("a"), &registry);
    let mut tally = task.tally();
    tally.event(&started("a"));
    tally.event(&model_done(10, 0, 40));
    assert_eq!(task.generated_today(), 40, "before the turn ends");
    // A subagent's call counts too, with the subagent's role.
    tally.event(&TurnEvent::Subagent {
        session: id("sub-a-1"),
        event: Box::new(model_done(10, 0, 2)),
    });
    assert_eq!(task.generated_today(), 42);
    assert!(text(&meter).contains("loopd_generated_tokens_total{role=\"subagent\"} 2"));
    // A child's turn end is not a turn of the task; its tool calls are the task's.
    tally.event(&TurnEvent::Subagent {
        session: id("sub-a-1"),
        event: Box::new(ended()),
    });
    assert_eq!(meter.report(Some(&id("a")), None).totals.turns, 0);
}

#[test]
fn without_timings_the_usage_counts() {
    let state = tempfile::tempdir().unwrap();
    let meter = Meter::load(&cfg(state.path(), "UTC"), system_clock()).unwrap();
    let registry = Registry::m2b();
    let task = meter.task(id("a"), &registry);
    task.background_call(
        &Usage {
            prompt_tokens: 50,
            completion_tokens: 9,
            cached_tokens: 20,
        },
        None,
        1_000,
    );
    let totals = meter.report(Some(&id("a")), None).totals;
    assert_eq!(
        (
            totals.evaluated_tokens,
            totals.cached_tokens,
            totals.generated_tokens
        ),
        (30, 20, 9)
    );
    let text = text(&meter);
    assert!(text.contains("loopd_model_calls_total{role=\"background\"} 1"));
    // Nothing timed: the speed's counters stay at 0, so the speed is not inflated.
    assert!(text.contains("loopd_generated_tokens_total{role=\"background\"} 9"));
    assert!(text.contains("loopd_generation_tokens_total{role=\"background\"} 0\n"));
}

#[test]
fn only_a_timed_generation_counts_for_the_speed() {
    let usage = Usage {
        prompt_tokens: 10,
        completion_tokens: 6,
        cached_tokens: 0,
    };
    let timings = |predicted_ms| ModelTimings {
        cache_n: 0,
        prompt_n: 10,
        prompt_ms: 1.0,
        predicted_n: 6,
        predicted_ms,
    };
    let timed = counts(&usage, Some(&timings(300.0)), 1);
    assert_eq!((timed.timed_generated, timed.generation_seconds), (6, 0.3));
    for untimed in [0.0, f64::NAN] {
        let c = counts(&usage, Some(&timings(untimed)), 1);
        assert_eq!((c.timed_generated, c.generation_seconds), (0, 0.0));
        assert_eq!(c.generated, 6);
    }
}

#[test]
fn invented_tool_names_do_not_grow_the_series() {
    // The attack: a model calling a new made-up name each time (directly and through
    // call_tool) must not make a series per name.
    let state = tempfile::tempdir().unwrap();
    let meter = Meter::load(&cfg(state.path(), "UTC"), system_clock()).unwrap();
    let registry = Registry::m2b();
    let task = meter.task(id("a"), &registry);
    let mut tally = task.tally();
    tally.event(&started("a"));
    for n in 0..200 {
        let (name, arguments) = if n % 2 == 0 {
            (format!("invented_{n}"), "{}".to_string())
        } else {
            (
                "call_tool".to_string(),
                format!("{{\"name\":\"made_up_{n}\",\"arguments\":{{}}}}"),
            )
        };
        tally.event(&call(n, &name, &arguments));
        tally.event(&result(n));
    }
    // Known ones keep their names: `echo` through call_tool, `find_tool` itself.
    tally.event(&call(
        500,
        "call_tool",
        "{\"name\":\"echo\",\"arguments\":{}}",
    ));
    tally.event(&result(500));
    tally.event(&call(501, "find_tool", "{\"query\":\"x\"}"));
    tally.event(&result(501));
    // A result whose call was never seen is counted, as unknown.
    tally.event(&result(999));
    let text = text(&meter);
    let tool_series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("loopd_tool_calls_total{"))
        .collect();
    assert_eq!(
        tool_series.len(),
        3,
        "one series per known tool and one for the rest: {tool_series:?}"
    );
    assert!(tool_series.contains(&"loopd_tool_calls_total{tool=\"unknown\",outcome=\"ok\"} 201"));
    assert!(tool_series.contains(&"loopd_tool_calls_total{tool=\"echo\",outcome=\"ok\"} 1"));
    assert!(tool_series.contains(&"loopd_tool_calls_total{tool=\"find_tool\",outcome=\"ok\"} 1"));
    assert!(!text.contains("invented") && !text.contains("made_up"));
    // The account hears of tool calls at the next model call, the turn's end, or when the
    // tally goes (a turn whose events stopped).
    assert_eq!(meter.report(Some(&id("a")), None).totals.tool_calls, 0);
    drop(tally);
    assert_eq!(meter.report(Some(&id("a")), None).totals.tool_calls, 203);
}

#[test]
fn the_accounts_survive_a_restart_and_the_day_turns_at_midnight_in_the_time_zone() {
    let state = tempfile::tempdir().unwrap();
    // 22:30 UTC is 23:30 in Berlin (winter): the day's last hour there.
    let clock = TestClock::at("2026-12-01T22:30:00Z");
    let cfg = cfg(state.path(), "Europe/Berlin");
    {
        let meter = Meter::load(&cfg, clock.clock()).unwrap();
        one_turn(&meter, "a", 9);
        meter.save().unwrap();
    }
    let meter = Meter::load(&cfg, clock.clock()).unwrap();
    assert_eq!(meter.generated_today(), 10, "read back after the restart");
    assert_eq!(meter.usage_today().day, "2026-12-01");
    assert_eq!(meter.usage_today().timezone, "Europe/Berlin");

    // 23:30 UTC is past midnight in Berlin: a new day, with nothing spent yet.
    clock.set("2026-12-01T23:30:00Z");
    assert_eq!(meter.today().to_string(), "2026-12-02");
    assert_eq!(meter.generated_today(), 0);
    one_turn(&meter, "b", 4);
    meter.save().unwrap();
    let meter = Meter::load(&cfg, clock.clock()).unwrap();
    assert_eq!(meter.generated_today(), 5);
    let day1 = meter.report(None, Some("2026-12-01".parse().unwrap()));
    assert_eq!(day1.totals.generated_tokens, 10);
    assert_eq!(day1.sessions.len(), 1);
    let names: Vec<_> = std::fs::read_dir(state.path().join(store::USAGE_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(names, ["2026-12-01.json", "2026-12-02.json"]);
}

#[test]
fn nothing_is_written_until_saved_and_a_save_writes_only_the_days_that_changed() {
    let state = tempfile::tempdir().unwrap();
    let clock = TestClock::at("2026-12-01T10:00:00Z");
    let cfg = cfg(state.path(), "UTC");
    let meter = Meter::load(&cfg, clock.clock()).unwrap();
    one_turn(&meter, "a", 1);
    // A kill -9 now loses the turn: nothing was written.
    assert_eq!(
        Meter::load(&cfg, clock.clock()).unwrap().generated_today(),
        0
    );
    meter.save().unwrap();
    let path = store::path_of(&state.path().join(store::USAGE_DIR), meter.today());
    std::fs::write(
        &path,
        "{\"day\":\"2026-12-01\",\"timezone\":\"UTC\",\"sessions\":{}}",
    )
    .unwrap();
    meter.save().unwrap();
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .contains("\"sessions\":{}"),
        "an unchanged day is not written again"
    );
}

#[test]
fn a_corrupt_day_stops_the_load_naming_the_file() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join(store::USAGE_DIR);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("2026-12-01.json"), "not json").unwrap();
    let err = Meter::load(&cfg(state.path(), "UTC"), system_clock())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("usage/2026-12-01.json"), "{err}");
}

#[test]
fn a_store_with_the_meters_append_times_observes_every_append() {
    let state = tempfile::tempdir().unwrap();
    let meter = Meter::load(&cfg(state.path(), "UTC"), system_clock()).unwrap();
    let store = crate::session::Store::new(state.path())
        .unwrap()
        .with_append_times(crate::session::AppendTimes::into_histogram(
            meter.metrics().append_histogram(),
        ));
    let mut session = store.create(&id("a")).unwrap();
    session
        .append(bxcore::LogRecord::Note {
            time: bxcore::Timestamp::now(),
            text: "one".into(),
        })
        .unwrap();
    // A child session opened through it (a subagent's) is timed too.
    let mut child = session.store().create(&id("a-child")).unwrap();
    child
        .append(bxcore::LogRecord::Note {
            time: bxcore::Timestamp::now(),
            text: "two".into(),
        })
        .unwrap();
    assert!(
        text(&meter).contains("loopd_log_append_duration_seconds_count 2"),
        "{}",
        text(&meter)
    );
}

#[test]
fn the_schedule_runs_go_to_the_meter_when_it_has_one() {
    let state = tempfile::tempdir().unwrap();
    let meter = Arc::new(Meter::load(&cfg(state.path(), "UTC"), system_clock()).unwrap());
    ScheduleRuns::default().ended("daily", "done");
    let runs = ScheduleRuns::into_meter(Arc::clone(&meter));
    runs.ended("daily", "done");
    runs.ended("daily", "skipped");
    let text = text(&meter);
    assert!(text.contains("loopd_schedule_runs_total{schedule=\"daily\",outcome=\"done\"} 1"));
    assert!(text.contains("loopd_schedule_runs_total{schedule=\"daily\",outcome=\"skipped\"} 1"));
}

#[test]
fn the_accounts_and_the_budgets_count_a_calls_tokens_alike() {
    let usage = Usage {
        prompt_tokens: 100,
        completion_tokens: 12,
        cached_tokens: 30,
    };
    let timings = |predicted_n| ModelTimings {
        cache_n: 30,
        prompt_n: 70,
        prompt_ms: 1.0,
        predicted_n,
        predicted_ms: 100.0,
    };
    // The server's figures disagree either way (a stop word's tokens, a draft model's).
    for t in [Some(timings(10)), Some(timings(15)), None] {
        let counted = counts(&usage, t.as_ref(), 1);
        let spent = crate::budget::ModelSpend::counted(&usage, t.as_ref());
        assert_eq!(counted.generated, spent.generated, "{t:?}");
        assert_eq!(counted.evaluated, spent.evaluated, "{t:?}");
    }
}
