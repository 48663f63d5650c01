//! A 5-turn session on a real llama-server with SmolLM2-135M: per turn, the prompt tokens,
//! what the slot's cache reused (`cache_n`), what was evaluated (`prompt_n`), prefill and
//! generation time, and loopd's own time; and the bytes of the fixed prefix (system prompt
//! plus tools array) sent with every model call. Then where a model call's time beyond the
//! server's own `timings` goes: loopd's model call minus `prompt_ms + predicted_ms`, beside a
//! plain client's (a new connection, the request written whole, the stream read to its end)
//! for a request of the same system prompt and tools.
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
use std::io::{Read, Write};
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
    let tools: Vec<serde_json::Value> = baseline
        .tools
        .iter()
        .map(|t| serde_json::json!({"type": "function", "function": t}))
        .collect();
    // loopd's calls of the same shape: a fresh session each, one question.
    let mut loopd_beyond = Vec::new();
    for n in 0..RAW_CALLS {
        let id = SessionId::new(&format!("fresh-{n}")).unwrap();
        let mut fresh = store.open_or_create(&id).unwrap();
        start_turn(&mut fresh, &format!("Name colour number {n}.")).unwrap();
        run_turn(&runtime, &mut fresh, &Stop::default(), &mut |event| {
            if let TurnEvent::ModelDone {
                model_us, timings, ..
            } = event
            {
                let t = timings.unwrap_or_default();
                loopd_beyond.push(*model_us as f64 / 1000.0 - t.prompt_ms - t.predicted_ms);
            }
        })
        .unwrap();
    }
    let raw_beyond: Vec<f64> = (0..RAW_CALLS)
        .map(|n| raw_beyond_timings(&server.url, &baseline.system, &tools, n))
        .collect();
    println!(
        "beyond the server's timings per model call of one question and the same system prompt \
         and tools: loopd's p50 {:.2} ms (min {:.2}) over {} calls (a fresh session each); a \
         plain client's p50 {:.2} ms (min {:.2}) over {RAW_CALLS} calls",
        median(&loopd_beyond),
        min(&loopd_beyond),
        loopd_beyond.len(),
        median(&raw_beyond),
        min(&raw_beyond),
    );
}

/// Plain-client calls timed.
const RAW_CALLS: usize = 12;

/// One streamed chat call by a plain client (a new connection, the request written at once,
/// the stream read to its end): its wall time minus the server's `prompt_ms + predicted_ms`.
fn raw_beyond_timings(url: &str, system: &str, tools: &[serde_json::Value], n: usize) -> f64 {
    let body = serde_json::json!({
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": format!("Name colour number {n}.")},
        ],
        "tools": tools,
        "stream": true,
        "max_tokens": MAX_ANSWER_TOKENS,
        "temperature": 0,
        "cache_prompt": true,
    })
    .to_string();
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    stream.set_nodelay(true).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    let text = String::from_utf8_lossy(&answer);
    let timings = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<serde_json::Value>(data).ok())
        .find_map(|chunk| chunk.get("timings").cloned())
        .unwrap();
    let server_ms =
        timings["prompt_ms"].as_f64().unwrap() + timings["predicted_ms"].as_f64().unwrap();
    wall_ms - server_ms
}

fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

fn min(samples: &[f64]) -> f64 {
    samples.iter().copied().fold(f64::INFINITY, f64::min)
}
