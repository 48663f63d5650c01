#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A scripted long session against fakellama (issue 6's test): three epochs (0, 1, 2) made by
//! two compactions, an untrusted fetch in epoch 0 summarised on the background slot, memory
//! notes from each compaction, and a heartbeat beat through a real engine. Labels are checked
//! after every turn (the fetch keeps the session untrusted in epoch 2 through the carries), and
//! within an epoch every main-slot prompt starts with the one before it, byte for byte, which
//! fakellama's cache figures confirm (`cache_n` covers the whole earlier prompt).

use crate::baseline::context_labels;
use crate::compact::owner_words::OWNER_WORDS_HEADING;
use crate::config::HEARTBEAT_PROMPT_FILE;
use crate::engine::{Engine, EngineParts, ToolSource};
use crate::llama::ServerInfo;
use crate::meter::{Meter, system_clock};
use crate::schedule::{Paths, Scheduler, SystemClock, specs};
use crate::session::Store;
use crate::tests::bed::{Bed, COMPACT_PHRASE, DUE_AFTER_TURN, ROOMY_N_CTX, SUMMARY_PHRASE, kinds};
use crate::tools::{FakeTools, Registry};
use bxcore::{DataClass, Labels, LogRecord, TurnEnd};
use proto::api::reserved::HEARTBEAT_SESSION;
use std::sync::Arc;
use std::time::Duration;

/// A phrase of `config/heartbeat.md`, for the script to match beats on.
const BEAT_PHRASE: &str = "scheduled heartbeat check";

/// The labels of the untrusted fetch (and of everything made from it).
fn fetch_labels() -> Labels {
    Labels::new(DataClass::Private, true)
}

/// The session's script: `fetch` calls `echo` once, summaries and two compactions (each with
/// notes) answer by rule, beats are quiet, the rest answers `done`.
fn long_script() -> String {
    format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "{SUMMARY_PHRASE}"
reply = "SUMMARY OF OTTERS"
[[rule]]
when_contains = "{COMPACT_PHRASE}"
times = 1
reply = "CARRY ONE: the user fetched a page on otters\n## Notes to remember\n- the user likes otters"
[[rule]]
when_contains = "{COMPACT_PHRASE}"
times = 1
reply = "CARRY TWO: otters, then rivers\n## Notes to remember\n- rivers matter too"
[[rule]]
when_contains = "{BEAT_PHRASE}"
reply = "HEARTBEAT_OK"
[[rule]]
when_role = "user"
when_contains = "fetch"
times = 1
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\":\"echo\",\"arguments\":{{\"text\":\"x\"}}}}" }}]
"#
    )
}

/// One step of the session: the task and the context the runtime reports (a tiny one makes
/// compaction due after the turn).
const STEPS: [(&str, u32); 9] = [
    ("fetch otters", ROOMY_N_CTX),
    ("tell me more about otters", ROOMY_N_CTX),
    ("and their rivers?", DUE_AFTER_TURN),
    ("epoch one, first question", ROOMY_N_CTX),
    ("epoch one, second question", ROOMY_N_CTX),
    ("epoch one, third question", DUE_AFTER_TURN),
    ("epoch two, first question", ROOMY_N_CTX),
    ("epoch two, second question", ROOMY_N_CTX),
    ("epoch two, third question", ROOMY_N_CTX),
];

/// A main-slot request: the epoch it was made in and fakellama's figures.
struct MainCall {
    epoch: u32,
    prompt: String,
    prompt_tokens: usize,
    cache_n: usize,
}

/// The epoch-start records of the session, as (epoch, carry, labels).
fn epoch_starts(session: &crate::session::Session) -> Vec<(u32, String, Labels)> {
    session
        .records()
        .iter()
        .filter_map(|r| match r {
            LogRecord::EpochStart {
                epoch,
                carry,
                class,
                untrusted,
                ..
            } => Some((*epoch, carry.clone(), Labels::new(*class, *untrusted))),
            _ => None,
        })
        .collect()
}

#[test]
fn a_long_session_crosses_three_epochs_with_labels_and_stable_prefixes() {
    let bed = Bed::new(&long_script());
    let mut session = bed.session("long");
    let mut calls: Vec<MainCall> = Vec::new();
    let mut seen = 0;
    for (step, (text, n_ctx)) in STEPS.iter().enumerate() {
        let epoch_before = session.epoch();
        let end = bed.task(&mut session, text, *n_ctx).unwrap();
        assert_eq!(end, TurnEnd::Done, "step {step}");
        let requests = bed.fake.server.requests();
        for r in &requests[seen..] {
            if r.body["id_slot"] == 0 {
                assert_eq!(r.slot_used, Some(0), "step {step}");
                calls.push(MainCall {
                    epoch: epoch_before,
                    prompt: r.prompt.clone(),
                    prompt_tokens: r.prompt_tokens,
                    cache_n: r.cache_n,
                });
            } else {
                assert_eq!(r.slot_used, Some(1), "background work, step {step}");
            }
        }
        seen = requests.len();

        // The labels, at every step: the fetch of step 0 keeps the session untrusted.
        assert_eq!(
            context_labels(&session),
            fetch_labels(),
            "step {step}, epoch {}: {:?}",
            session.epoch(),
            kinds(&session)
        );
        let expected_epoch = match step {
            0..=1 => 0,
            2..=4 => 1,
            _ => 2,
        };
        assert_eq!(session.epoch(), expected_epoch, "step {step}");
        if *n_ctx == ROOMY_N_CTX {
            let baseline = session.current_baseline().expect("the epoch's baseline");
            assert_eq!(baseline.epoch, session.epoch(), "step {step}");
            assert!(
                baseline.memory.is_empty(),
                "untrusted notes stay out of the baseline: step {step}"
            );
            let epoch = session.epoch();
            let in_log = session
                .records()
                .iter()
                .any(|r| matches!(r, LogRecord::Baseline { epoch: e, .. } if *e == epoch));
            assert!(in_log, "epoch {epoch}'s baseline in the log, step {step}");
        }
    }

    // Epoch 0's fetch was summarised on the background slot with the result's labels.
    let summaries: Vec<Labels> = session
        .records()
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolSummary {
                class, untrusted, ..
            } => Some(Labels::new(*class, *untrusted)),
            _ => None,
        })
        .collect();
    assert_eq!(summaries, [fetch_labels()]);
    let summary_requests = bed.bodies_with(SUMMARY_PHRASE);
    assert_eq!(summary_requests.len(), 1);
    assert_eq!(summary_requests[0].1, Some(1));

    // Two compactions, each carry untrusted: the second is made from the first, and keeps
    // the owner's words of epoch 0 after its own (issue 34).
    let starts = epoch_starts(&session);
    let epoch_0 = "> fetch otters\n> tell me more about otters\n> and their rivers?";
    let epoch_1 =
        "> epoch one, first question\n> epoch one, second question\n> epoch one, third question";
    assert_eq!(
        starts,
        [
            (
                1,
                format!(
                    "CARRY ONE: the user fetched a page on otters\n\n{OWNER_WORDS_HEADING}\n\
                     {epoch_0}"
                ),
                fetch_labels()
            ),
            (
                2,
                format!(
                    "CARRY TWO: otters, then rivers\n\n{OWNER_WORDS_HEADING}\n{epoch_0}\n\
                     {epoch_1}"
                ),
                fetch_labels()
            ),
        ]
    );
    let compactions = bed.bodies_with(COMPACT_PHRASE);
    assert_eq!(compactions.len(), 2);
    assert!(compactions.iter().all(|(_, slot)| *slot == Some(1)));
    assert!(
        compactions[1].0["messages"]
            .to_string()
            .contains("CARRY ONE"),
        "the second compaction reads the first carry"
    );

    // Memory: each compaction's notes, with the carry's labels.
    let notes = crate::memory::list(&bed.cfg).unwrap();
    let texts: Vec<&str> = notes.iter().map(|n| n.text.as_str()).collect();
    assert_eq!(texts, ["the user likes otters", "rivers matter too"]);
    for note in &notes {
        assert_eq!(note.session.as_str(), "long");
        assert_eq!(Labels::new(note.class, note.untrusted), fetch_labels());
    }

    // Within an epoch, each main prompt extends the one before it, and the cache covers it.
    for epoch in 0..=2 {
        let in_epoch: Vec<&MainCall> = calls.iter().filter(|c| c.epoch == epoch).collect();
        assert!(
            in_epoch.len() >= 3,
            "epoch {epoch}: {} calls",
            in_epoch.len()
        );
        for pair in in_epoch.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            assert!(
                after.prompt.starts_with(&before.prompt),
                "epoch {epoch}: the prefix changed\n--- before\n{}\n--- after\n{}",
                before.prompt,
                after.prompt
            );
            assert!(
                after.cache_n >= before.prompt_tokens,
                "epoch {epoch}: cache_n {} < earlier prompt {}",
                after.cache_n,
                before.prompt_tokens
            );
        }
    }
    // A new epoch starts from a new prefix: its first prompt does not extend the last one.
    for epoch in 1..=2 {
        let last_before = calls.iter().rfind(|c| c.epoch == epoch - 1).unwrap();
        let first = calls.iter().find(|c| c.epoch == epoch).unwrap();
        assert!(!first.prompt.starts_with(&last_before.prompt));
        assert!(first.prompt.contains("Summary of the conversation so far:"));
    }

    heartbeat_stays_clean(&bed);
}

/// One beat through a real engine over the same state dir: the heartbeat session has its own
/// context, untouched by the long session's untrusted carry and untrusted notes.
fn heartbeat_stays_clean(bed: &Bed) {
    let prompts = bed.cfg.baseline.system.parent().unwrap();
    std::fs::write(
        prompts.join(HEARTBEAT_PROMPT_FILE),
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../config/heartbeat.md"
        )),
    )
    .unwrap();
    let mut cfg = bed.cfg.clone();
    cfg.heartbeat.every = "50ms".into();
    let specs = specs(&cfg).unwrap();
    let engine = Engine::new(EngineParts {
        cfg: cfg.clone(),
        store: Store::new(&cfg.state_dir).unwrap(),
        port: Arc::new(FakeTools::new()),
        tools: ToolSource::Fake(Registry::m2b()),
        system: crate::tests::bed::SYSTEM.into(),
        models: Arc::new(crate::route::Router::single(
            bed.fake.client(),
            &crate::config::Slots::default(),
            ServerInfo {
                n_ctx: ROOMY_N_CTX,
                total_slots: 1,
                model: "fakellama".into(),
                model_path: String::new(),
                build_info: String::new(),
            },
        )),
        blocking: bed.fake.blocking(),
        meter: Arc::new(Meter::load(&cfg, system_clock()).unwrap()),
    });
    let counts = bed.fake.rt.block_on(async {
        let heartbeat = Scheduler::start(
            Arc::new(engine.clone()),
            specs,
            Paths::of(&cfg),
            Arc::new(SystemClock),
            crate::meter::ScheduleRuns::default(),
        )
        .unwrap();
        let mut counts = heartbeat.counts();
        let reached = tokio::time::timeout(
            Duration::from_secs(20),
            counts.wait_for(|c| c.finished >= 1),
        )
        .await
        .expect("a beat finished in time")
        .map(|c| *c)
        .unwrap();
        heartbeat.stop().await;
        engine.shutdown(20_000).await;
        reached
    });
    assert_eq!(counts.notified, 0, "a quiet beat");
    let beat = bed.session(HEARTBEAT_SESSION);
    assert_eq!(beat.epoch(), 0);
    assert!(
        beat.current_baseline().unwrap().memory.is_empty(),
        "the untrusted notes are left out"
    );
    assert_eq!(
        context_labels(&beat),
        Labels::PUBLIC,
        "the heartbeat's labels are its own: {:?}",
        kinds(&beat)
    );
}
