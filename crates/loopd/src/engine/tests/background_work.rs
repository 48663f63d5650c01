#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The work after a turn (summaries, compaction) runs on the background slot without the
//! main-slot permit, through a real engine over fakellama: a slow summary on one session does
//! not delay a task on another, and the session it belongs to waits for it (one writer).

use crate::api::{Backend, Submitted};
use crate::config::Config;
use crate::engine::Engine;
use crate::llama::tests::support::Fake;
use crate::session::Store;
use crate::tools::FakeTools;
use bxcore::{LogRecord, SessionId, TurnEnd, TurnEvent};
use proto::api::TaskRequest;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a test waits for anything, in milliseconds.
const WAIT_MS: u64 = 20_000;
/// How often a test looks again at what it waits for, in milliseconds.
const POLL_MS: u64 = 10;
/// A phrase of `config/summarise.md`, for the script to match summary requests on.
const SUMMARY_PHRASE: &str = "Summarise the tool output below";
/// fakellama's background slot (`[slots] background`).
const BACKGROUND_SLOT: usize = 1;

/// A script whose summaries take `summary_ms`; a task with "fetch" calls `echo` (summarised).
fn script(summary_ms: u64) -> String {
    format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "{SUMMARY_PHRASE}"
delay_ms = {summary_ms}
reply = "SUMMARY OF OTTERS"
[[rule]]
when_role = "user"
when_contains = "fetch"
times = 1
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\":\"echo\",\"arguments\":{{\"text\":\"otters\"}}}}" }}]
"#
    )
}

/// fakellama and an engine over it that summarises `echo` results.
struct Bed {
    fake: Fake,
    engine: Engine,
    store: Store,
    _state: tempfile::TempDir,
}

impl Bed {
    fn new(script: &str) -> Bed {
        let state = tempfile::tempdir().unwrap();
        std::fs::write(state.path().join("system.md"), "You are a test.").unwrap();
        std::fs::write(
            state.path().join("summarise.md"),
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../config/summarise.md"
            )),
        )
        .unwrap();
        let mut cfg = Config {
            state_dir: state.path().join("state"),
            ..Config::default()
        };
        std::fs::create_dir(&cfg.state_dir).unwrap();
        cfg.baseline.system = state.path().join("system.md");
        cfg.compact.summarise = vec!["echo".into()];
        let fake = Fake::script(script);
        let engine = super::engine_over(&fake, &cfg, Arc::new(FakeTools::new()));
        Bed {
            fake,
            store: Store::new(&cfg.state_dir).unwrap(),
            engine,
            _state: state,
        }
    }

    /// Submits `text` on `session` and waits (bounded) for its acknowledgement.
    async fn submit(&self, session: &str, text: &str) -> Submitted {
        let task = TaskRequest {
            session: Some(SessionId::new(session).unwrap()),
            text: text.into(),
            task_id: None,
            overheard: Vec::new(),
        };
        bounded(self.engine.submit(task), "the task's acknowledgement")
            .await
            .unwrap()
    }

    /// Waits (bounded) until fakellama's background slot answers a request.
    async fn background_slot_busy(&self) {
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        while !self.fake.server.slots()[BACKGROUND_SLOT].is_processing {
            assert!(
                Instant::now() < deadline,
                "no request reached the background slot"
            );
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    /// The kinds of session `id`'s records.
    fn kinds(&self, id: &str) -> Vec<&'static str> {
        self.store
            .read(&SessionId::new(id).unwrap())
            .unwrap()
            .iter()
            .map(LogRecord::kind)
            .collect()
    }
}

/// `future`, failing the test when it takes longer than [`WAIT_MS`].
async fn bounded<F: std::future::Future>(future: F, what: &str) -> F::Output {
    tokio::time::timeout(Duration::from_millis(WAIT_MS), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not come within {WAIT_MS} ms"))
}

/// How the turn of `submitted` ended (waits, bounded, for its `ended` event).
async fn end_of(mut submitted: Submitted) -> TurnEnd {
    bounded(
        async {
            while let Some(event) = submitted.events.recv().await {
                if let TurnEvent::Ended { end, .. } = event {
                    return end;
                }
            }
            panic!("the events ended without an ended event")
        },
        "the turn's end",
    )
    .await
}

#[test]
fn a_slow_summary_on_one_session_does_not_delay_a_task_on_another() {
    // Far longer than any wait of the test: a task that waited for it would fail the test.
    let bed = Bed::new(&script(6 * WAIT_MS));
    bed.fake.rt.block_on(async {
        let fetch = bed.submit("a", "fetch otters").await;
        assert_eq!(end_of(fetch).await, TurnEnd::Done);
        bed.background_slot_busy().await;
        let other = bed.submit("b", "hello").await;
        assert_eq!(end_of(other).await, TurnEnd::Done);
        assert!(
            !bed.kinds("a").contains(&"tool_summary"),
            "the summary is still being written: {:?}",
            bed.kinds("a")
        );
    });
}

#[test]
fn the_next_task_of_the_same_session_waits_for_its_background_work() {
    let bed = Bed::new(&script(3_000));
    bed.fake.rt.block_on(async {
        let fetch = bed.submit("a", "fetch otters").await;
        assert_eq!(end_of(fetch).await, TurnEnd::Done);
        bed.background_slot_busy().await;
        let next = bed.submit("a", "and then?").await;
        assert_eq!(end_of(next).await, TurnEnd::Done);
        let kinds = bed.kinds("a");
        let summary = kinds.iter().position(|k| *k == "tool_summary");
        let second_user = kinds
            .iter()
            .enumerate()
            .filter(|(_, k)| **k == "user")
            .nth(1)
            .map(|(i, _)| i);
        assert!(
            summary.is_some() && summary < second_user,
            "the summary is written before the next task starts: {kinds:?}"
        );
        bed.engine.shutdown(WAIT_MS).await;
    });
}
