//! Each session keeps its KV cache in a file between its turns (issue 22): two sessions
//! alternate five turns each on loopd's one main slot of a real llama-server (SmolLM2-135M,
//! `--slot-save-path` = loopd's `[kv]` directory, `--cache-ram 0` so that the server's own
//! prompt cache in memory restores nothing by itself), once with `[kv] enabled = true` and
//! once with `enabled = false`, each on a fresh server and a fresh loopd daemon.
//!
//! Per turn: the prompt tokens, the cached ones (the server's `timings.cache_n`), the evaluated
//! ones (prompt − cached), the tokens new since the session's last call plus the one the server
//! always evaluates again, the server's prefill time (`timings.prompt_ms`), and the wall time of
//! `boxctl --json task`. The figures are the turn events' (`ModelDone`), as llama-server
//! reported them.
//!
//! Then, against the same server with loopd stopped, every KV file loopd restored before a
//! turn (the bench copies each one aside just before the turn that restores it) is restored
//! into slot 0 and saved back (`POST /slots/0?action=restore|save`): the server's own
//! `restore_ms` and `save_ms`, the tokens and the bytes. From them: the size of a KV file per
//! 1 000 tokens, and per switch back to a session its cost with files against the prefill of
//! the same turn without, read two ways ([`print_switches`]).
//!
//! `cargo build --release -p loopd -p boxctl && eval "$(scripts/fetch-parts.sh --print-paths)"
//!  && export LLAMA_SERVER SMOLLM2_GGUF QWEN_GGUF && cargo bench -p e2e --bench kv_switch`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use bxcore::{ModelTimings, TurnEnd, TurnEvent, Usage};
use e2e::real::{KV_SERVER_ARGS, LlamaServer, RealParts, output_within};
use e2e::{Stack, bin_dir};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

mod report;

use report::{print_probes, print_switches, print_turns};

/// The most tokens one answer may have (`llama.max_answer_tokens`): each answer adds at most
/// this to its session's prompt.
const MAX_ANSWER_TOKENS: u32 = 128;
/// Turns per session.
const TURNS: usize = 5;
/// The longest one task may take before the bench calls it a hang.
const TASK_LIMIT: Duration = Duration::from_secs(300);
/// The longest one save or restore may take.
const SLOT_LIMIT: Duration = Duration::from_secs(120);
/// Each restore and save measured this many times; the median is kept.
const PROBES: usize = 3;
/// The file each probe saves to (in the server's `--slot-save-path`; not a name loopd reads).
const PROBE_FILE: &str = "probe.copy";

/// The two sessions and their tasks, one per turn: each asks for a short list, so every answer
/// runs to tens of tokens and the prompts grow turn by turn.
const SESSIONS: [(&str, [&str; TURNS]); 2] = [
    (
        "alpha",
        [
            "List five fruits, one per line, with a few words on each.",
            "Now list five vegetables the same way.",
            "Now five kinds of bread, the same way.",
            "Now five cheeses, the same way.",
            "Now five herbs, the same way.",
        ],
    ),
    (
        "beta",
        [
            "List five rivers, one per line, with a few words on each.",
            "Now list five mountains the same way.",
            "Now five lakes, the same way.",
            "Now five islands, the same way.",
            "Now five deserts, the same way.",
        ],
    ),
];

/// One turn of one session, as the turn events and the clock saw it.
#[derive(Debug, Clone, Copy)]
struct Turn {
    session: usize,
    /// From 1.
    n: usize,
    usage: Usage,
    timings: ModelTimings,
    /// Time inside the model call as loopd measured it (`ModelDone.model_us`).
    model_us: u64,
    /// `boxctl --json task`, from its start to its exit.
    wall: Duration,
}

impl Turn {
    fn evaluated(&self) -> u64 {
        self.usage.prompt_tokens - self.usage.cached_tokens
    }
}

/// One restore of a file into slot 0 and one save of it back, as the server timed them.
#[derive(Debug, Clone, Copy, Default)]
struct Probe {
    tokens: u64,
    bytes: u64,
    restore_ms: f64,
    save_ms: f64,
    /// The HTTP round trips, as a client (loopd) waits for them.
    restore_wall_ms: f64,
    save_wall_ms: f64,
}

/// A session's state after its turn `after`, as a file: `(session, after)`.
type Probes = HashMap<(usize, usize), Probe>;

fn main() {
    let Some(parts) = RealParts::from_env() else {
        println!("kv_switch: skipped (no real parts in the environment)");
        return;
    };
    for name in ["loopd", "boxctl"] {
        let path = bin_dir().join(name);
        assert!(
            path.is_file(),
            "{} is missing: run `cargo build --release -p loopd -p boxctl` first",
            path.display()
        );
    }
    println!(
        "SmolLM2-135M, llama-server {} --slot-save-path <loopd's kv dir>; loopd \
         max_answer_tokens {MAX_ANSWER_TOKENS}; sessions {} and {} alternate, {TURNS} turns each",
        KV_SERVER_ARGS.join(" "),
        SESSIONS[0].0,
        SESSIONS[1].0
    );
    let (with, probes) = scenario(&parts, true);
    let (without, _) = scenario(&parts, false);
    print_turns("with KV files", &with);
    print_turns("without KV files", &without);
    print_probes(&probes);
    print_switches(&with, &without, &probes);
}

/// The alternating turns on a fresh llama-server behind a fresh loopd with `[kv] enabled =
/// kv`; with files, then the probes of every file a turn restored.
fn scenario(parts: &RealParts, kv: bool) -> (Vec<Turn>, Probes) {
    let dir = tempfile::tempdir().unwrap();
    let kv_dir = dir.path().join("state/kv");
    std::fs::create_dir_all(&kv_dir).unwrap();
    let mut args: Vec<&str> = KV_SERVER_ARGS.to_vec();
    let kv_arg = kv_dir.to_str().unwrap().to_string();
    args.extend(["--slot-save-path", &kv_arg]);
    let log = dir.path().join("llama-server.log");
    let server =
        LlamaServer::start_logged(&parts.llama_server, &parts.smollm2, &args, &log).unwrap();
    let mut stack = Stack::with_model(
        dir,
        server.running,
        server.url,
        &format!("[llama]\nmax_answer_tokens = {MAX_ANSWER_TOKENS}\n[kv]\nenabled = {kv}\n"),
    )
    .unwrap();
    // Other work on the machine shows here: every figure below shares its cores.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "  load average before the run {} KV files: {}",
        if kv { "with" } else { "without" },
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut turns = Vec::new();
    for n in 1..=TURNS {
        for (session, (id, tasks)) in SESSIONS.iter().enumerate() {
            // The file loopd restores before this turn: the session's state after its last.
            keep_aside(&kv_dir, session, n - 1);
            turns.push(task(&stack, session, n, id, tasks[n - 1]));
        }
    }
    if !kv {
        assert!(
            !kv_dir.join(kv_file(0)).exists(),
            "loopd wrote KV files with [kv] enabled = false"
        );
        return (turns, Probes::new());
    }
    // The first session's state after its last turn (saved before the other's last turn):
    // what loopd saved before that turn.
    keep_aside(&kv_dir, 0, TURNS);
    // loopd stopped (killed: no save at shutdown), so nothing else uses the server's slots.
    stack.loopd = None;
    let mut probes = Probes::new();
    for session in 0..SESSIONS.len() {
        for after in 1..=TURNS {
            let copy = copy_name(session, after);
            if kv_dir.join(&copy).is_file() {
                probes.insert((session, after), probe(&stack.llama_url, &copy));
            }
        }
    }
    (turns, probes)
}

/// `<session>.after<N>.copy`: a session's KV file after its turn N, kept where loopd neither
/// reads nor prunes (it only looks at `.bin` and `.json`).
fn copy_name(session: usize, after: usize) -> String {
    format!("{}.after{after}.copy", SESSIONS[session].0)
}

/// The name of `session`'s KV file (`s-<SHA-256 of its id>.bin`, `docs/kv.md`).
fn kv_file(session: usize) -> String {
    let id = bxcore::SessionId::new(SESSIONS[session].0).unwrap();
    format!("{}{}", loopd::kv::name_of(&id), loopd::kv::KV_SUFFIX)
}

/// Copies `session`'s KV file, if loopd made one, as its state after turn `after`.
fn keep_aside(kv_dir: &Path, session: usize, after: usize) {
    let file = kv_dir.join(kv_file(session));
    if after > 0 && file.is_file() {
        std::fs::copy(&file, kv_dir.join(copy_name(session, after))).unwrap();
    }
}

/// One `boxctl --json task`, timed; panics unless it ended done after one model call.
fn task(stack: &Stack, session: usize, n: usize, id: &str, text: &str) -> Turn {
    let mut command = Command::new(bin_dir().join("boxctl"));
    command
        .arg("--socket")
        .arg(&stack.socket)
        .args(["--json", "task", "--session", id, text]);
    let started = Instant::now();
    let out = output_within(command, TASK_LIMIT).unwrap_or_else(|hang| panic!("{hang}"));
    let wall = started.elapsed();
    let events: Vec<TurnEvent> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        out.status.success()
            && matches!(
                events.last(),
                Some(TurnEvent::Ended {
                    end: TurnEnd::Done,
                    ..
                })
            ),
        "{id} turn {n} did not end done: {out:?}"
    );
    let calls: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ModelDone {
                usage,
                model_us,
                timings,
            } => Some((*usage, *model_us, *timings)),
            _ => None,
        })
        .collect();
    // SmolLM2's template offers no tools: every turn is one model call.
    let [(usage, model_us, timings)] = calls[..] else {
        panic!("{id} turn {n}: {} model calls, not one", calls.len());
    };
    Turn {
        session,
        n,
        usage,
        timings: timings.unwrap_or_else(|| panic!("{id} turn {n}: the server sent no timings")),
        model_us,
        wall,
    }
}

/// `POST path` with a JSON `body` to the server at `url` (`http://HOST:PORT`): the answer's
/// JSON and the round trip. Panics unless it answered 200.
fn post(url: &str, path: &str, body: &str) -> (serde_json::Value, f64) {
    let addr = url.strip_prefix("http://").unwrap();
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(SLOT_LIMIT)).unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    let (head, json) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "POST {path} {body}: {answer}"
    );
    (serde_json::from_str(json).unwrap(), ms)
}

/// `file` restored into slot 0 and saved back, [`PROBES`] times: the medians.
fn probe(url: &str, file: &str) -> Probe {
    let mut runs = Vec::new();
    for _ in 0..PROBES {
        let (restored, restore_wall_ms) = post(
            url,
            "/slots/0?action=restore",
            &serde_json::json!({ "filename": file }).to_string(),
        );
        let (saved, save_wall_ms) = post(
            url,
            "/slots/0?action=save",
            &serde_json::json!({ "filename": PROBE_FILE }).to_string(),
        );
        let number = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{restored}"));
        assert_eq!(
            restored["n_restored"], saved["n_saved"],
            "{restored} {saved}"
        );
        runs.push(Probe {
            tokens: saved["n_saved"].as_u64().unwrap(),
            bytes: saved["n_written"].as_u64().unwrap(),
            restore_ms: number(&restored["timings"]["restore_ms"]),
            save_ms: number(&saved["timings"]["save_ms"]),
            restore_wall_ms,
            save_wall_ms,
        });
    }
    let median = |field: fn(&Probe) -> f64| {
        let mut all: Vec<f64> = runs.iter().map(field).collect();
        all.sort_by(f64::total_cmp);
        all[all.len() / 2]
    };
    Probe {
        tokens: runs[0].tokens,
        bytes: runs[0].bytes,
        restore_ms: median(|p| p.restore_ms),
        save_ms: median(|p| p.save_ms),
        restore_wall_ms: median(|p| p.restore_wall_ms),
        save_wall_ms: median(|p| p.save_wall_ms),
    }
}
