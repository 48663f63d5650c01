#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The heartbeat against fakellama, through a real engine and the scheduler (the heartbeat is
//! the schedule `heartbeat`): a quiet beat keeps nothing, any other answer becomes a
//! notification, and a beat is skipped while the previous one runs.

use crate::config::Config;
use crate::config::HEARTBEAT_PROMPT_FILE;
use crate::engine::{Engine, EngineParts, ToolSource};
use crate::heartbeat::list;
use crate::llama::ServerInfo;
use crate::llama::tests::support::Fake;
use crate::meter::{Meter, system_clock};
use crate::schedule::{Paths, RunCounts, Scheduler, Spec, SystemClock, specs};
use crate::session::Store;
use crate::tools::{FakeTools, Registry, ToolPort};
use proto::{ToolRequest, ToolResponse};
use std::sync::Arc;
use std::time::Duration;

/// The longest any test waits for the heartbeat to get somewhere, in milliseconds.
const WAIT_MS: u64 = 20_000;
/// The interval of the tests' heartbeat.
const EVERY: &str = "50ms";
/// A phrase of `config/heartbeat.md`, for scripts to match beats on.
const BEAT_PHRASE: &str = "scheduled heartbeat check";

/// fakellama, an engine over it and the heartbeat's schedule, in a temporary state dir.
struct Bed {
    fake: Fake,
    engine: Engine,
    cfg: Config,
    specs: Vec<Spec>,
    _state: tempfile::TempDir,
}

impl Bed {
    fn new(script: &str) -> Bed {
        Bed::with_port(script, Arc::new(FakeTools::new()))
    }

    fn with_port(script: &str, port: Arc<dyn ToolPort>) -> Bed {
        let state = tempfile::tempdir().unwrap();
        std::fs::write(state.path().join("system.md"), "You are a test.").unwrap();
        std::fs::write(
            state.path().join(HEARTBEAT_PROMPT_FILE),
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../config/heartbeat.md"
            )),
        )
        .unwrap();
        let mut cfg = Config {
            state_dir: state.path().join("state"),
            ..Config::default()
        };
        std::fs::create_dir(&cfg.state_dir).unwrap();
        cfg.baseline.system = state.path().join("system.md");
        cfg.heartbeat.every = EVERY.into();
        let specs = specs(&cfg).unwrap();
        assert_eq!(specs.len(), 1, "the heartbeat's schedule");
        let fake = Fake::script(script);
        let engine = Engine::new(EngineParts {
            cfg: cfg.clone(),
            store: Store::new(&cfg.state_dir).unwrap(),
            port,
            tools: ToolSource::Fake(Registry::m2b()),
            system: "You are a test.".into(),
            models: Arc::new(crate::route::Router::single(
                fake.client(),
                &crate::config::Slots::default(),
                ServerInfo {
                    n_ctx: fakellama::DEFAULT_N_CTX,
                    total_slots: 1,
                    model: "fakellama".into(),
                    model_path: String::new(),
                    build_info: String::new(),
                },
            )),
            blocking: fake.blocking(),
            meter: Arc::new(Meter::load(&cfg, system_clock()).unwrap()),
        });
        Bed {
            fake,
            engine,
            cfg,
            specs,
            _state: state,
        }
    }

    /// Runs the heartbeat until `until` holds of its counts (at most [`WAIT_MS`]), stops it
    /// and the engine, and gives the counts.
    fn beat_until(&self, until: impl Fn(&RunCounts) -> bool) -> RunCounts {
        self.fake.rt.block_on(async {
            let heartbeat = Scheduler::start(
                Arc::new(self.engine.clone()),
                self.specs.clone(),
                Paths::of(&self.cfg),
                Arc::new(SystemClock),
                crate::meter::ScheduleRuns::default(),
            )
            .unwrap();
            let mut counts = heartbeat.counts();
            let reached = tokio::time::timeout(
                Duration::from_millis(WAIT_MS),
                counts.wait_for(|c| until(c)),
            )
            .await
            .expect("the heartbeat got there in time")
            .map(|c| *c)
            .unwrap();
            heartbeat.stop().await;
            self.engine.shutdown(WAIT_MS).await;
            reached
        })
    }

    /// The chat requests fakellama got that were beats.
    fn beat_requests(&self) -> usize {
        self.fake
            .server
            .requests()
            .iter()
            .filter(|r| r.body.to_string().contains(BEAT_PHRASE))
            .count()
    }
}

#[test]
fn a_quiet_beat_keeps_no_notification() {
    let bed = Bed::new(r#"default_reply = "HEARTBEAT_OK""#);
    let counts = bed.beat_until(|c| c.finished >= 2);
    assert_eq!(counts.notified, 0);
    assert!(list(&bed.cfg).unwrap().is_empty());
    assert!(bed.beat_requests() >= 2);
}

#[test]
fn any_other_answer_becomes_a_notification_with_its_text() {
    let bed = Bed::new(&format!(
        r#"default_reply = "HEARTBEAT_OK"
[[rule]]
when_contains = "{BEAT_PHRASE}"
reply = "The backup failed last night."
"#
    ));
    let counts = bed.beat_until(|c| c.notified >= 1);
    assert!(counts.notified >= 1);
    let notifications = list(&bed.cfg).unwrap();
    assert!(!notifications.is_empty());
    let first = &notifications[0];
    assert_eq!(first.session.as_str(), "heartbeat");
    assert_eq!(first.turn, 1);
    assert_eq!(first.text, "The backup failed last night.");
}

#[test]
fn a_beat_is_skipped_while_the_previous_one_runs() {
    let bed = Bed::new(&format!(
        r#"default_reply = "HEARTBEAT_OK"
[[rule]]
when_contains = "{BEAT_PHRASE}"
reply = "HEARTBEAT_OK"
delay_ms = 600
"#
    ));
    let counts = bed.beat_until(|c| c.skipped >= 3);
    assert_eq!(counts.finished, 0, "the first beat still ran");
    assert!(bed.beat_requests() <= 1, "no second beat started");
    assert!(list(&bed.cfg).unwrap().is_empty());
}

/// A port whose every answer is private and untrusted, like a fetched page of the owner's.
struct PrivatePage;

impl ToolPort for PrivatePage {
    fn call(&self, _request: &ToolRequest) -> ToolResponse {
        ToolResponse::Result {
            content: "the backup log: 3 errors".into(),
            class: bxcore::DataClass::Private,
            untrusted: true,
            truncated: false,
        }
    }
}

#[test]
fn a_notification_carries_the_labels_of_the_turn_that_made_it() {
    let bed = Bed::with_port(
        &format!(
            r#"default_reply = "HEARTBEAT_OK"
[[rule]]
when_contains = "{BEAT_PHRASE}"
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\": \"echo\", \"arguments\": {{\"text\": \"log\"}}}}" }}]
[[rule]]
when_contains = "the backup log"
reply = "The backup failed: 3 errors."
"#
        ),
        Arc::new(PrivatePage),
    );
    bed.beat_until(|c| c.notified >= 1);
    let notifications = list(&bed.cfg).unwrap();
    let first = &notifications[0];
    assert_eq!(first.text, "The backup failed: 3 errors.");
    assert_eq!(
        (first.class, first.untrusted),
        (bxcore::DataClass::Private, true),
        "made from a private, untrusted result"
    );
}
