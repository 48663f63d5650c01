//! Context management on fakellama (issue 6): the prompt tokens the server re-evaluates per
//! turn inside one epoch against the tokens that are new, then the cost of one compaction and
//! of the first turn of the new epoch.
//!
//! `cargo bench -p loopd --bench context`
//!
//! fakellama's tokeniser is its deterministic stand-in (runs of ASCII letters and digits cut
//! into pieces of at most 4 bytes, every other character one token), not a model's BPE: token
//! counts are about 1.5 to 2 times what a real tokeniser gives for English, but the prefix
//! relations (what is cached, what is new) are the same, since they depend on byte-identical
//! prompts only.

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use bxcore::SessionId;
use loopd::blocking::Blocking;
use loopd::config::Config;
use loopd::llama::{Client, ClientOptions};
use loopd::session::Store;
use loopd::tools::{FakeTools, Registry};
use loopd::turn::{Runtime, Stop, run_turn, start_turn};
use std::time::Instant;

/// Turns measured inside the epoch.
const TURNS: usize = 12;
/// The context fakellama and loopd use (tokens): large enough that no turn compacts.
const N_CTX: u32 = 1 << 20;
const SYSTEM: &str = "You are a careful assistant running in a small sandboxed machine. \
                      Answer briefly, use tools when they help, and say when you are unsure.";
const COMPACT_PHRASE: &str = "is about to be replaced by a summary";

fn script() -> String {
    format!(
        r#"default_reply = "Otters are semi-aquatic mammals of the weasel family. They eat fish, crabs and frogs, and they live along rivers, lakes and coasts. Sea otters use stones as tools to open shells."
[[rule]]
when_contains = "{COMPACT_PHRASE}"
reply = "The user asked a series of questions about otters: their diet, habitat, tool use and social life. The answers were short and factual.\n## Notes to remember\n- the user is interested in otters"
"#
    )
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt
        .block_on(fakellama::start(fakellama::Options {
            n_ctx: N_CTX,
            script: fakellama::Script::parse(&script()).unwrap(),
            ..Default::default()
        }))
        .unwrap();

    let state = tempfile::tempdir().unwrap();
    std::fs::write(state.path().join("system.md"), SYSTEM).unwrap();
    std::fs::write(
        state.path().join("compact.md"),
        include_str!("../../../config/compact.md"),
    )
    .unwrap();
    let mut cfg = Config::default();
    cfg.baseline.system = state.path().join("system.md");
    cfg.state_dir = state.path().to_path_buf();
    let store = Store::new(state.path()).unwrap();
    let client = Client::new(ClientOptions::for_url(&fake.url()).unwrap());
    let blocking = Blocking::new(rt.handle().clone());
    let registry = Registry::m2b();
    let port = FakeTools::new();
    let runtime = Runtime {
        cfg: &cfg,
        models: &loopd::route::Targets::of(&client, &loopd::config::Slots::default()),
        blocking: &blocking,
        port: &port,
        registry: &registry,
        system: SYSTEM,
        n_ctx: N_CTX,
        children: &loopd::subagent::Subagents,
        owner: &loopd::turn::NoOwner,
        meter: &loopd::turn::NoMeter,
    };
    let mut session = store
        .open_or_create(&SessionId::new("bench").unwrap())
        .unwrap();

    println!(
        "{TURNS} turns in one epoch on fakellama (its stand-in tokeniser), one model call each:"
    );
    println!(
        "| turn | prompt tokens | cache_n | prompt_n | new tokens + 1 | earlier prompt re-evaluated |"
    );
    println!("|---|---|---|---|---|---|");
    let mut previous: Option<(usize, usize)> = None; // (prompt tokens, completion tokens)
    let (mut sum_prompt_n, mut sum_new) = (0, 0);
    for turn in 1..=TURNS {
        fake.clear_requests();
        start_turn(
            &mut session,
            &format!("Question {turn}: tell me one more thing about otters, please."),
        )
        .unwrap();
        run_turn(&runtime, &mut session, &Stop::default(), &mut |_| {}).unwrap();
        let requests = fake.requests();
        assert_eq!(requests.len(), 1);
        let r = &requests[0];
        let (new, reeval) = match previous {
            // The previous call's answer is cached but its last token: one more is evaluated.
            Some((p, c)) => (r.prompt_tokens - (p + c) + 1, p.saturating_sub(r.cache_n)),
            None => (r.prompt_tokens, 0),
        };
        if previous.is_some() {
            sum_prompt_n += r.prompt_n;
            sum_new += new;
        }
        println!(
            "| {turn} | {} | {} | {} | {new} | {reeval} |",
            r.prompt_tokens, r.cache_n, r.prompt_n
        );
        previous = Some((r.prompt_tokens, r.completion_tokens));
    }
    println!("turns 2..{TURNS}: prompt_n {sum_prompt_n}, new tokens + 1 {sum_new}");

    fake.clear_requests();
    let started = Instant::now();
    loopd::compact::compact_session(&mut session, &runtime).unwrap();
    let wall = started.elapsed();
    let requests = fake.requests();
    let c = &requests[0];
    println!(
        "compaction: wall {wall:?} (one background-slot call, fakellama without delay); \
         prompt tokens {}, cache_n {} (slot {:?}), prompt_n {}, completion tokens {}, epoch now {}",
        c.prompt_tokens,
        c.cache_n,
        c.slot_used,
        c.prompt_n,
        c.completion_tokens,
        session.epoch()
    );

    fake.clear_requests();
    let started = Instant::now();
    start_turn(&mut session, "And what about their young?").unwrap();
    run_turn(&runtime, &mut session, &Stop::default(), &mut |_| {}).unwrap();
    let wall = started.elapsed();
    let requests = fake.requests();
    let f = &requests[0];
    println!(
        "first turn of the new epoch: wall {wall:?}; prompt tokens {}, cache_n {}, prompt_n {} \
         (was {} tokens before compaction)",
        f.prompt_tokens,
        f.cache_n,
        f.prompt_n,
        previous.map_or(0, |(p, c)| p + c)
    );
}
