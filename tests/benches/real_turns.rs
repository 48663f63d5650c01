//! A 5-turn session on a real llama-server with SmolLM2-135M: per turn, the prompt tokens,
//! what the slot's cache reused (`cache_n`), what was evaluated (`prompt_n`), prefill and
//! generation time, and loopd's own time; and the bytes of the fixed prefix (system prompt
//! plus tools array) sent with every model call.
//!
//! `eval "$(scripts/fetch-parts.sh --print-paths)" && export LLAMA_SERVER SMOLLM2_GGUF QWEN_GGUF
//!  && cargo bench -p e2e --bench real_turns`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use bxcore::{ModelTimings, SessionId, TurnEvent, Usage};
use e2e::real::{LlamaServer, RealParts};
use e2e::workspace_root;
use loopd::blocking::Blocking;
use loopd::config::Config;
use loopd::llama::{Client, ClientOptions};
use loopd::session::Store;
use loopd::tools::{FakeTools, Registry};
use loopd::turn::{Runtime, Stop, run_turn, start_turn};
use std::time::Instant;

/// The most tokens one answer may have.
const MAX_ANSWER_TOKENS: u32 = 96;

const QUESTIONS: [&str; 5] = [
    "Hello! Who are you?",
    "What is the capital of France?",
    "And of Italy?",
    "Name a colour.",
    "Thank you, goodbye.",
];

fn main() {
    let Some(parts) = RealParts::from_env() else {
        println!("real_turns: skipped (no real parts in the environment)");
        return;
    };
    let server = LlamaServer::start(
        &parts.llama_server,
        &parts.smollm2,
        &[
            "-c",
            "6144",
            "--parallel",
            "3",
            "--temp",
            "0",
            "--seed",
            "7",
        ],
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut options = ClientOptions::for_url(&server.url).unwrap();
    // SmolLM2 at temperature 0 can ramble until its context is full: keep answers short.
    options.max_tokens = Some(MAX_ANSWER_TOKENS);
    let client = Client::new(options);
    let blocking = Blocking::new(rt.handle().clone());
    let state = tempfile::tempdir().unwrap();
    let store = Store::new(state.path()).unwrap();
    let cfg = Config::default();
    let registry = Registry::m2b();
    let system = std::fs::read_to_string(workspace_root().join("config/system.md")).unwrap();
    let port = FakeTools::new();
    let runtime = Runtime {
        cfg: &cfg,
        models: &loopd::route::Targets::of(&client, &loopd::config::Slots::default()),
        blocking: &blocking,
        port: &port,
        registry: &registry,
        system: &system,
        n_ctx: blocking.wait(client.props()).unwrap().n_ctx,
        children: &loopd::subagent::Subagents,
        owner: &loopd::turn::NoOwner,
        meter: &loopd::turn::NoMeter,
    };
    let mut session = store
        .open_or_create(&SessionId::new("bench").unwrap())
        .unwrap();
    println!(
        "turn | prompt | cache_n | prompt_n | added+1 | prefill ms | gen ms | turn ms | loopd µs | loopd %"
    );
    let mut previous: Option<Usage> = None;
    for (n, question) in QUESTIONS.iter().enumerate() {
        let started = Instant::now();
        start_turn(&mut session, question).unwrap();
        let mut done: Option<(Usage, u64, Option<ModelTimings>)> = None;
        run_turn(&runtime, &mut session, &Stop::default(), &mut |event| {
            if let TurnEvent::ModelDone {
                usage,
                model_us,
                timings,
            } = event
            {
                done = Some((*usage, *model_us, *timings));
            }
        })
        .unwrap();
        let wall_us = started.elapsed().as_micros() as u64;
        let (usage, model_us, timings) = done.unwrap();
        let timings = timings.unwrap_or_default();
        // Tokens new since the last turn: this prompt minus everything the last call saw
        // (its prompt and its answer). The goal is prompt_n = added + 1: the server always
        // evaluates one token again (here, the last token of the answer, which it generated
        // but never evaluated).
        let added = previous.map_or(usage.prompt_tokens, |p| {
            usage.prompt_tokens - p.prompt_tokens - p.completion_tokens
        });
        let own_us = wall_us.saturating_sub(model_us);
        println!(
            "{} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {} | {:.2}",
            n + 1,
            usage.prompt_tokens,
            timings.cache_n,
            timings.prompt_n,
            if previous.is_some() { added + 1 } else { added },
            timings.prompt_ms,
            timings.predicted_ms,
            wall_us as f64 / 1000.0,
            own_us,
            own_us as f64 * 100.0 / wall_us as f64,
        );
        previous = Some(usage);
    }
    let baseline = session.current_baseline().unwrap();
    let tools = serde_json::to_string(&baseline.tools).unwrap();
    println!(
        "fixed prefix per model call: {} bytes (system prompt {} + tools array {})",
        baseline.system.len() + tools.len(),
        baseline.system.len(),
        tools.len()
    );
}
