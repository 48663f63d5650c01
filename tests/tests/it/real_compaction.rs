#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Compaction on the real llama-server in small slots (issue 12, point 1): ten long turns on
//! Qwen2.5-Coder-0.5B (the demo's model) and on SmolLM2, each turn ends `done`, and the
//! session crosses at least two epochs, whether the model's summary was used or the carry was
//! made without it. Without the parts each test says so and passes, unless
//! BOXMAKER_REQUIRE_REAL_MODEL=1 (see docs/real-model.md).
//!
//! The first turn gives a fact ("my locker code is 4471"); once the second compaction is done
//! the session is asked for it, and the answer is printed, not checked: it is the figure in
//! docs/PERFORMANCE.md (`FIGURE` lines of
//! `cargo test -p e2e --test it real_compaction -- --nocapture`).

use bxcore::{LogRecord, SessionId, TurnEnd, TurnEvent};
use e2e::Stack;
use e2e::real::{LlamaServer, RealParts, boxctl_within, one_at_a_time, template};
use proto::api::SessionList;
use std::path::Path;
use std::time::{Duration, Instant};

/// Tokens of context per slot: small, as on a small machine.
const SLOT_TOKENS: u32 = 1_536;
/// loopd's default `[slots]` are 0, 1 and 2; llama-server splits `-c` among them.
const SLOTS: u32 = 3;
/// The long turns of the session.
const TURNS: usize = 10;
/// The fact of the first turn, and what the question after the second compaction looks for.
const LOCKER_CODE: &str = "4471";
/// The longest one `boxctl task` may take (it may compact before its call): a guard against
/// a hang, far above what it takes on an idle machine, since a shared one is many times slower.
const TASK_LIMIT: Duration = Duration::from_secs(900);
/// How often [`wait_idle`] asks loopd.
const IDLE_POLL: Duration = Duration::from_millis(200);
/// Deterministic sampling, and warnings only in the server's log.
const SERVER_FLAGS: [&str; 6] = ["--temp", "0", "--seed", "7", "-lv", "2"];
/// loopd's config: answers kept short, every turn within a few steps, compaction's answer
/// bounded, and the slot size checked.
const LOOPD_TOML: &str = "[expect]\nn_ctx = 1536\nslots = 3\n[loop]\nmax_steps = 4\n\
                          [compact]\nanswer_tokens = 192\n";
/// `[llama]` keys: short answers.
const LLAMA_TOML: &str = "max_answer_tokens = 48\n";

/// A day's notes: about 250 tokens of plain text, different every day.
fn day_notes(day: usize) -> String {
    const PEOPLE: [&str; 5] = ["Anna", "Bruno", "Chloe", "Dmitri", "Eva"];
    const PROJECTS: [&str; 4] = ["garden shed", "tax return", "kitchen shelf", "photo album"];
    const ITEMS: [&str; 6] = ["apples", "rice", "coffee", "soap", "batteries", "lemons"];
    const DAYS: [&str; 5] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"];
    let pick = |list: &[&'static str], k: usize| list[(day * 7 + k) % list.len()];
    let opening = if day == 1 {
        format!("My locker code is {LOCKER_CODE}; please keep it in mind. ")
    } else {
        String::new()
    };
    format!(
        "{opening}Notes for day {day}. In the morning I worked on the {} with {} and we moved \
         its deadline to {}. At the market I bought {}, {} and {} for {} euros. At lunch {} \
         told me about a new bakery near the station that opens at seven. In the afternoon I \
         read chapter {day} of a book about river otters and wrote down three questions about \
         their dens. In the evening I called {} about the party on {} and promised to bring a \
         salad. On the way home the bus was late, so I walked past the old mill and saw two \
         herons by the weir. My neighbour asked to borrow the ladder again on the weekend, and \
         the plumber said the new tap arrives in about ten days. Tomorrow I must water the \
         plants, pay the water bill and return the library books. Reply with one short \
         sentence that acknowledges these notes, without any tool.",
        pick(&PROJECTS, 0),
        pick(&PEOPLE, 1),
        pick(&DAYS, 2),
        pick(&ITEMS, 3),
        pick(&ITEMS, 4),
        pick(&ITEMS, 5),
        10 + day * 3,
        pick(&PEOPLE, 6),
        pick(&PEOPLE, 8),
        pick(&DAYS, 9),
    )
}

/// What a turn did: how it ended, its answer, its last prompt's tokens, and how long it took.
struct Turn {
    end: TurnEnd,
    answer: String,
    prompt_tokens: u64,
    took: Duration,
}

/// `boxctl --json task --session SESSION TEXT`.
fn task(stack: &Stack, session: &str, text: &str) -> Turn {
    let started = Instant::now();
    let out = boxctl_within(
        stack,
        &["--json", "task", "--session", session, text],
        TASK_LIMIT,
    )
    .unwrap_or_else(|hang| panic!("{hang}"));
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let events: Vec<TurnEvent> = stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let answer: String = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::Content { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let prompt_tokens = events
        .iter()
        .rev()
        .find_map(|e| match e {
            TurnEvent::ModelDone { usage, .. } => Some(usage.prompt_tokens),
            _ => None,
        })
        .unwrap_or(0);
    let end = match events.last() {
        Some(TurnEvent::Ended { end, .. }) => end.clone(),
        _ => panic!(
            "no end: exit {:?}\n{stdout}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ),
    };
    Turn {
        end,
        answer,
        prompt_tokens,
        took,
    }
}

/// Waits (at most [`TASK_LIMIT`]) until `session` has nothing running or queued: the work
/// after a turn (summaries, compaction) is done. How long that took.
fn wait_idle(stack: &Stack, session: &str) -> Duration {
    let started = Instant::now();
    loop {
        let out = boxctl_within(stack, &["--json", "sessions"], TASK_LIMIT)
            .unwrap_or_else(|hang| panic!("{hang}"));
        let list: SessionList = serde_json::from_slice(&out.stdout).unwrap();
        let idle = list
            .sessions
            .iter()
            .find(|s| s.id.as_str() == session)
            .is_some_and(|s| !s.busy && s.queued == 0);
        if idle {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < TASK_LIMIT,
            "{session} still busy after {TASK_LIMIT:?}"
        );
        std::thread::sleep(IDLE_POLL);
    }
}

/// The session's records, read and verified with loopd's own store.
fn records(stack: &Stack, id: &str) -> Vec<LogRecord> {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    store.read(&SessionId::new(id).unwrap()).unwrap()
}

/// Each epoch start of the log: its number, its carry, and why the model's summary was not
/// used (the note before it), if it was not.
fn epochs(records: &[LogRecord]) -> Vec<(u32, String, Option<String>)> {
    let mut out = Vec::new();
    let mut failure = None;
    for record in records {
        match record {
            LogRecord::Note { text, .. } if text.contains("the model's compaction failed") => {
                failure = Some(text.clone());
            }
            LogRecord::EpochStart { epoch, carry, .. } => {
                out.push((*epoch, carry.clone(), failure.take()));
            }
            _ => {}
        }
    }
    out
}

/// Ten long turns on `model` in slots of [`SLOT_TOKENS`]: every turn must end `done` and the
/// session must reach epoch 2; after the second compaction the locker code is asked for and
/// the answer printed (`FIGURE name ...`).
fn ten_long_turns(parts: &RealParts, name: &str, model: &Path, server_args: &[&str]) {
    let _one = one_at_a_time();
    let ctx = (SLOT_TOKENS * SLOTS).to_string();
    let mut args = vec!["-c", ctx.as_str(), "--parallel", "3"];
    args.extend(SERVER_FLAGS);
    args.extend(server_args);
    let server = LlamaServer::start(&parts.llama_server, &model.to_path_buf(), &args).unwrap();
    let mut stack = Stack {
        socket: Default::default(),
        llama_url: server.url,
        model: Some(server.running),
        loopd: None,
        loopd_max_open_files: None,
        dir: tempfile::tempdir().unwrap(),
    };
    stack.socket = stack.dir.path().join("loopd.sock");
    stack.start_loopd_with(LOOPD_TOML, LLAMA_TOML).unwrap();
    let session = "long";
    let mut asked = None;
    let question = "What is my locker code? Reply with the number only.";
    for day in 1..=TURNS {
        let turn = task(&stack, session, &day_notes(day));
        let after = wait_idle(&stack, session);
        let epoch = epochs(&records(&stack, session)).len();
        eprintln!(
            "{name} turn {day}: {:?} in {:.1} s ({} prompt tokens), then {:.1} s of work after \
             it; epoch {epoch}: {:?}",
            turn.end,
            turn.took.as_secs_f64(),
            turn.prompt_tokens,
            after.as_secs_f64(),
            turn.answer.trim()
        );
        assert_eq!(
            turn.end,
            TurnEnd::Done,
            "{name}, turn {day}: {}",
            turn.answer
        );
        if epoch >= 2 && asked.is_none() {
            let asking = task(&stack, session, question);
            wait_idle(&stack, session);
            eprintln!("{name} question in epoch {epoch}: {:?}", asking.answer);
            asked = Some((epoch, asking.answer));
        }
    }
    let records = records(&stack, session);
    let epochs = epochs(&records);
    for (epoch, carry, failure) in &epochs {
        let how = failure.as_deref().unwrap_or("written by the model");
        eprintln!("{name} epoch {epoch} ({how}):\n{carry}\n");
    }
    assert!(epochs.len() >= 2, "{name}: only {} epochs", epochs.len());
    let (epoch, answer) = asked.expect("asked once epoch 2 began");
    let by_model = epochs.iter().filter(|(_, _, f)| f.is_none()).count();
    eprintln!(
        "FIGURE {name}: locker code after the second compaction (asked in epoch {epoch}): \
         {} ({answer:?}); {} compactions, {by_model} written by the model",
        if answer.contains(LOCKER_CODE) {
            "correct"
        } else {
            "wrong"
        },
        epochs.len()
    );
}

#[test]
fn qwen_ten_long_turns_in_small_slots_cross_two_epochs() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let template = template("qwen2.5-tools.jinja");
    let template = template.to_str().unwrap();
    ten_long_turns(
        &parts,
        "qwen",
        &parts.qwen,
        &["--chat-template-file", template],
    );
}

#[test]
fn smollm2_ten_long_turns_in_small_slots_cross_two_epochs() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    ten_long_turns(&parts, "smollm2", &parts.smollm2, &[]);
}
