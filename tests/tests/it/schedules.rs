#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Schedules end to end (issue 17): loopd runs `[[schedules]]` by itself, `boxctl schedules`
//! shows them, `boxctl schedule run|pause|resume` drive them, and a pause outlives a restart.
//! On the real model, an `every = "2s"` schedule runs at least twice and its answers are in
//! `boxctl schedules` and the session log.

use bxcore::{LogRecord, SessionId, TurnEnd};
use e2e::real::{LlamaServer, RealParts, one_at_a_time, template};
use e2e::{Stack, StackOptions, show};
use proto::api::{RunOutcome, ScheduleInfo, ScheduleList, ScheduleStarted};
use std::time::{Duration, Instant};

/// The longest a test waits for something to happen, in milliseconds.
const WAIT_MS: u64 = 60_000;
/// How long the real model may take for its runs, in milliseconds.
const REAL_WAIT_MS: u64 = 300_000;

/// `boxctl --json schedules`.
fn schedules(stack: &Stack) -> Vec<ScheduleInfo> {
    let out = stack.boxctl(&["schedules", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let list: ScheduleList =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", show(&out)));
    list.schedules
}

fn schedule(stack: &Stack, name: &str) -> ScheduleInfo {
    schedules(stack)
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no schedule {name}"))
}

/// Waits (bounded by `wait_ms`) until `done` holds for schedule `name`, and gives it.
fn wait_for(
    stack: &Stack,
    name: &str,
    wait_ms: u64,
    done: impl Fn(&ScheduleInfo) -> bool,
) -> ScheduleInfo {
    let deadline = Instant::now() + Duration::from_millis(wait_ms);
    loop {
        let found = schedule(stack, name);
        if done(&found) {
            return found;
        }
        assert!(Instant::now() < deadline, "gave up waiting: {found:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ended(info: &ScheduleInfo) -> bool {
    info.last_run
        .as_ref()
        .is_some_and(|run| matches!(run.outcome, RunOutcome::Ended { .. }))
}

/// The session's records, read with loopd's own store.
fn records(stack: &Stack, id: &str) -> Vec<LogRecord> {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    store.read(&SessionId::new(id).unwrap()).unwrap()
}

fn turn_ends(records: &[LogRecord]) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, LogRecord::TurnEnd { .. }))
        .count()
}

/// A schedule that never comes due by itself in a test (yearly), on session `daily`.
const YEARLY: &str = "[[schedules]]\nname = \"yearly\"\ncron = \"0 0 1 1 *\"\n\
                      task = \"Say hello.\"\nsession = \"daily\"\nnotify = \"always\"\n";

#[test]
fn a_schedule_runs_on_demand_and_its_pause_outlives_a_restart() {
    let mut stack = Stack::start(StackOptions {
        loopd_toml: YEARLY.into(),
        ..Default::default()
    })
    .unwrap();
    let info = schedule(&stack, "yearly");
    assert!(info.next_run.is_some() && !info.paused, "{info:?}");
    assert!(info.last_run.is_none());

    let out = stack.boxctl(&["schedule", "run", "yearly", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let started: ScheduleStarted = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(started.session.as_str(), "daily");
    let info = wait_for(&stack, "yearly", WAIT_MS, ended);
    let run = info.last_run.unwrap();
    assert_eq!(run.turn, Some(started.turn));
    assert!(
        matches!(
            run.outcome,
            RunOutcome::Ended {
                end: TurnEnd::Done,
                notified: true,
                ..
            }
        ),
        "{run:?}"
    );
    assert_eq!(turn_ends(&records(&stack, "daily")), 1);
    let notes = stack.boxctl(&["notifications"]);
    assert!(
        String::from_utf8_lossy(&notes.stdout).contains("Hello from fakellama."),
        "{}",
        show(&notes)
    );

    let out = stack.boxctl(&["schedule", "pause", "yearly"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(schedule(&stack, "yearly").paused);
    drop(stack.loopd.take());
    stack.start_loopd(YEARLY).unwrap();
    let info = schedule(&stack, "yearly");
    assert!(info.paused, "the pause is kept across a restart: {info:?}");
    assert!(info.next_run.is_none());
    assert!(info.last_run.is_some(), "the last run is kept too");
    let out = stack.boxctl(&["schedule", "resume", "yearly"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(!schedule(&stack, "yearly").paused);

    let unknown = stack.boxctl(&["schedule", "run", "nope"]);
    assert_ne!(unknown.status.code(), Some(0), "{}", show(&unknown));
}

#[test]
fn qwen_runs_an_every_two_seconds_schedule_at_least_twice() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let _one = one_at_a_time();
    let file = template("qwen2.5-tools.jinja");
    let mut args = vec!["-c", "4096", "--parallel", "3"];
    args.extend(["--temp", "0", "--seed", "7", "-lv", "2"]);
    args.extend(["--chat-template-file", file.to_str().unwrap()]);
    let server = LlamaServer::start(&parts.llama_server, &parts.qwen, &args).unwrap();
    let toml = "[loop]\nmax_steps = 2\n[[schedules]]\nname = \"tick\"\nevery = \"2s\"\n\
                task = \"Answer with one short sentence: is the sky blue?\"\n\
                session = \"ticks\"\nnotify = \"always\"\n";
    let dir = tempfile::tempdir().unwrap();
    let stack = Stack::with_model(dir, server.running, server.url, toml).unwrap();
    // Two runs ended: the second began after the first (a run never overlaps its schedule's
    // previous one), so the log holds at least two whole turns.
    let info = wait_for(&stack, "tick", REAL_WAIT_MS, |info| {
        ended(info) && turn_ends(&records(&stack, "ticks")) >= 2
    });
    let run = info.last_run.clone().unwrap();
    assert_eq!(run.session.as_str(), "ticks");
    assert!(run.turn.is_some_and(|t| t >= 2), "{info:?}");
    let log = records(&stack, "ticks");
    let answers = log
        .iter()
        .filter(|r| matches!(r, LogRecord::Assistant { content, .. } if !content.trim().is_empty()))
        .count();
    assert!(answers >= 2, "{log:?}");
    let listed = stack.boxctl(&["schedules"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains("tick") && text.contains("every 2s"), "{text}");
}
