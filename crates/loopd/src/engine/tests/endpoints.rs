#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Turns over two model servers (issue 20), through a real engine over two fakellamas:
//! sessions spread over both and each keeps to one, its prefix cached there; a session whose
//! endpoint dies ends the turn in flight as a single endpoint's would, and its next turn runs
//! on the other.

use crate::api::{Backend, Submitted};
use crate::blocking::Blocking;
use crate::config::{Config, RoleSlots};
use crate::engine::{Engine, EngineParts, ToolSource};
use crate::llama::ServerInfo;
use crate::llama::tests::support::{Fake, runtime};
use crate::meter::{Meter, system_clock};
use crate::route::Router;
use crate::session::Store;
use crate::tools::Registry;
use bxcore::{TurnEnd, TurnEvent};
use proto::api::TaskRequest;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

/// The longest a test waits for anything, in milliseconds.
const WAIT_MS: u64 = 20_000;

struct Bed {
    /// The client the router holds for `a`: its faults are the router's.
    a_client: crate::llama::Client,
    a: Option<Fake>,
    b: Fake,
    engine: Engine,
    rt: tokio::runtime::Runtime,
    _state: tempfile::TempDir,
}

fn fake(reply: &str) -> Fake {
    Fake::script(&format!("default_reply = {reply:?}\n"))
}

impl Bed {
    fn new() -> Bed {
        let state = tempfile::tempdir().unwrap();
        let mut cfg = Config {
            state_dir: state.path().join("state"),
            ..Config::default()
        };
        std::fs::create_dir(&cfg.state_dir).unwrap();
        cfg.baseline.system = state.path().join("system.md");
        std::fs::write(&cfg.baseline.system, "You are a test.").unwrap();
        let (a, b) = (fake("from a"), fake("from b"));
        let slots = RoleSlots::from(&cfg.slots);
        let info = ServerInfo {
            n_ctx: fakellama::DEFAULT_N_CTX,
            total_slots: fakellama::DEFAULT_SLOTS,
            model: "fakellama".into(),
            model_path: String::new(),
            build_info: String::new(),
        };
        let a_client = a.client();
        let router = Router::fixed(
            vec![
                ("a".into(), a_client.clone(), slots.clone()),
                ("b".into(), b.client(), slots),
            ],
            info,
        );
        // The engine's waits run on a runtime of their own: `a` is stopped mid-test.
        let rt = runtime();
        let engine = Engine::new(EngineParts {
            store: Store::new(&cfg.state_dir).unwrap(),
            port: Arc::new(crate::tools::FakeTools::new()),
            tools: ToolSource::Fake(Registry::m2b()),
            system: "You are a test.".into(),
            models: Arc::new(router),
            blocking: Blocking::new(rt.handle().clone()),
            meter: Arc::new(Meter::load(&cfg, system_clock()).unwrap()),
            cfg,
        });
        Bed {
            a_client,
            a: Some(a),
            b,
            engine,
            rt,
            _state: state,
        }
    }

    fn submit(&self, session: &str, text: &str) -> Submitted {
        let task: TaskRequest =
            serde_json::from_value(serde_json::json!({ "session": session, "text": text }))
                .unwrap();
        self.rt
            .block_on(bounded(self.engine.submit(task), "the acknowledgement"))
            .unwrap()
    }

    /// The turn's end and its answer's text.
    fn end_of(&self, mut submitted: Submitted) -> (TurnEnd, String) {
        self.rt.block_on(bounded(
            async {
                let mut answer = String::new();
                while let Some(event) = submitted.events.recv().await {
                    match event {
                        TurnEvent::Content { text, .. } => answer.push_str(&text),
                        TurnEvent::Ended { end, .. } => return (end, answer),
                        _ => {}
                    }
                }
                panic!("the events ended without an ended event")
            },
            "the turn's end",
        ))
    }
}

async fn bounded<F: std::future::Future>(future: F, what: &str) -> F::Output {
    tokio::time::timeout(Duration::from_millis(WAIT_MS), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not come within {WAIT_MS} ms"))
}

/// For each session named in the main-slot prompts `fake` saw: the slots they ran on.
fn sessions_seen(fake: &Fake) -> BTreeMap<String, BTreeSet<usize>> {
    let mut seen: BTreeMap<String, BTreeSet<usize>> = BTreeMap::new();
    for r in fake.server.requests() {
        if r.body["id_slot"] != 0 {
            continue;
        }
        for n in 0..4 {
            let name = format!("task of s{n}");
            if r.prompt.contains(&name) {
                seen.entry(name)
                    .or_default()
                    .insert(r.slot_used.unwrap_or(99));
            }
        }
    }
    seen
}

#[test]
fn sessions_spread_over_both_endpoints_and_each_keeps_to_one() {
    let bed = Bed::new();
    for round in 0..2 {
        let submitted: Vec<Submitted> = (0..4)
            .map(|n| bed.submit(&format!("s{n}"), &format!("task of s{n}, round {round}")))
            .collect();
        for s in submitted {
            assert_eq!(bed.end_of(s).0, TurnEnd::Done);
        }
    }
    let on_a = sessions_seen(bed.a.as_ref().unwrap());
    let on_b = sessions_seen(&bed.b);
    assert_eq!(on_a.len(), 2, "a ran {on_a:?}, b ran {on_b:?}");
    assert_eq!(on_b.len(), 2, "a ran {on_a:?}, b ran {on_b:?}");
    assert!(
        on_a.keys().all(|s| !on_b.contains_key(s)),
        "a session's turns went to both: a {on_a:?}, b {on_b:?}"
    );
}

#[test]
fn a_session_whose_endpoint_dies_fails_that_turn_and_runs_the_next_on_the_other() {
    let mut bed = Bed::new();
    let (end, answer) = bed.end_of(bed.submit("x", "first"));
    assert_eq!((end, answer.as_str()), (TurnEnd::Done, "from a"));
    // `a` stops; no look has found it down yet, so the next turn still goes there and
    // fails as a single endpoint's would.
    drop(bed.a.take());
    let (end, _) = bed.end_of(bed.submit("x", "second"));
    assert!(matches!(end, TurnEnd::Failed { .. }), "{end:?}");
    let (end, answer) = bed.end_of(bed.submit("x", "third"));
    assert_eq!((end, answer.as_str()), (TurnEnd::Done, "from b"));
    let status = bed.rt.block_on(bed.engine.status());
    let a = &status.llama.endpoints[0];
    assert_eq!(a.state, "failing");
    assert!(a.last_error.is_some(), "{a:?}");
    assert_eq!(status.llama.endpoints[1].sessions, 1);
}

/// The main-slot requests `fake` saw whose prompt holds `marker`, in order.
fn main_requests(fake: &Fake, marker: &str) -> Vec<fakellama::RecordedRequest> {
    fake.server
        .requests()
        .into_iter()
        .filter(|r| r.body["id_slot"] == 0 && r.prompt.contains(marker))
        .collect()
}

#[test]
fn each_session_finds_its_whole_prefix_cached_on_its_endpoint() {
    let bed = Bed::new();
    for round in 0..3 {
        let submitted: Vec<Submitted> = ["p", "q"]
            .iter()
            .map(|s| bed.submit(s, &format!("{s}-session says round {round}")))
            .collect();
        for s in submitted {
            assert_eq!(bed.end_of(s).0, TurnEnd::Done);
        }
    }
    for marker in ["p-session", "q-session"] {
        let seen: Vec<_> = [bed.a.as_ref().unwrap(), &bed.b]
            .into_iter()
            .map(|f| main_requests(f, marker))
            .filter(|r| !r.is_empty())
            .collect();
        assert_eq!(seen.len(), 1, "{marker} ran on both endpoints");
        let calls = &seen[0];
        assert_eq!(calls.len(), 3, "{marker}");
        // Each turn's prompt starts with the whole of the one before (the slot kept it), not
        // just the system prompt and tools every session shares.
        for pair in calls.windows(2) {
            assert!(
                pair[1].cache_n >= pair[0].prompt_tokens,
                "{marker}: cached {} of {}, the turn before had {}",
                pair[1].cache_n,
                pair[1].prompt_tokens,
                pair[0].prompt_tokens
            );
        }
    }
}

#[test]
fn a_session_waiting_for_its_slot_is_routed_again_when_its_endpoint_fails_meanwhile() {
    let bed = Bed::new();
    let (end, answer) = bed.end_of(bed.submit("w", "first"));
    assert_eq!((end, answer.as_str()), (TurnEnd::Done, "from a"));
    // Another turn holds a's main slot; w's next task waits for it.
    let held = bed
        .engine
        .models()
        .main_for(&bxcore::SessionId::new("w").unwrap());
    // The first turn's worker gives the slot back just after its `ended` event: wait for it.
    let permit = bed
        .rt
        .block_on(bounded(held.gate.clone().acquire_owned(), "a's main slot"))
        .unwrap();
    let routed = bed.engine.models().routed();
    let engine = bed.engine.clone();
    let task: TaskRequest =
        serde_json::from_value(serde_json::json!({ "session": "w", "text": "second" })).unwrap();
    let waiting = bed.rt.spawn(async move { engine.submit(task).await });
    bed.rt.block_on(bounded(
        async {
            // Routed to a, and waiting for its slot.
            while bed.engine.models().routed() == routed {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        },
        "the task waiting for its slot",
    ));
    // a fails a call meanwhile; then its slot is given back.
    bed.a_client
        .faults()
        .record(&crate::llama::InferError::Stalled { after_ms: 1 });
    drop(permit);
    let submitted = bed
        .rt
        .block_on(bounded(waiting, "the acknowledgement"))
        .unwrap()
        .unwrap();
    let (end, answer) = bed.end_of(submitted);
    assert_eq!((end, answer.as_str()), (TurnEnd::Done, "from b"));
}
