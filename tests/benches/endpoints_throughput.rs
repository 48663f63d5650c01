//! Several endpoints (issue 20): 8 sessions, one task each submitted at once over loopd's API
//! socket, then a second task on each at once, against ONE llama-server and against TWO
//! (`[[llama.endpoints]]` "one" and "two"), each server on one thread (`-t 1`) with SmolLM2-135M.
//! Per layout and round: the wall time, the tokens generated and per second, and the share of
//! the prompt tokens the servers' caches served. Round 2's share shows whether each session's
//! turns kept to the endpoint that holds its prefix.
//!
//! The figures come from the turn events' usage (`ModelDone.usage`: what llama-server reported
//! for each main call, as `boxctl --json task` prints it); loopd's usage accounts
//! (`GET /v1/usage`, every role) are printed beside them as a check.
//!
//! `cargo build --release -p loopd -p boxctl && set -a; eval "$(scripts/fetch-parts.sh
//! --print-paths)"; set +a; cargo bench -p e2e --bench endpoints_throughput`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use bxcore::{ModelTimings, TurnEnd, TurnEvent, Usage};
use e2e::real::{LlamaServer, RealParts, output_within};
use e2e::{DAEMON_LOG_LEVEL, READY_TIMEOUT_MS, Running, bin_dir, workspace_root};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The most tokens one answer may have (`llama.max_answer_tokens`): short turns keep the run
/// to minutes on a small machine.
const MAX_ANSWER_TOKENS: u32 = 48;
/// The longest one task may take before the bench calls it a hang.
const TASK_LIMIT: Duration = Duration::from_secs(600);
/// The longest a `boxctl status` or `usage` may take.
const QUERY_LIMIT: Duration = Duration::from_secs(30);
/// Each llama-server: one thread, loopd's three default slots (main 0, background 1,
/// subagent 2), deterministic sampling, warnings only on stderr.
const SERVER_ARGS: [&str; 12] = [
    "-t",
    "1",
    "-c",
    "6144",
    "--parallel",
    "3",
    "--temp",
    "0",
    "--seed",
    "7",
    "-lv",
    "2",
];
/// loopd's log, in its directory.
const LOG: &str = "loopd.log";
/// What loopd's router logs when a session's turn goes to another endpoint or slot than its
/// last one (`route::Router::main_for`).
const MOVED: &str = "the session moves to another endpoint or slot";
/// What the router logs when it first sees an endpoint up (`route::watch`).
const UP: &str = "endpoint is up";
/// The endpoints' names in the two-endpoint layout.
const NAMES: [&str; 2] = ["one", "two"];

/// Round 1: one task per session, all different, so each session has a prefix of its own.
/// Each asks for more than [`MAX_ANSWER_TOKENS`], so every answer runs to the cap: the
/// sessions weigh the same and the layouts do the same work, whichever endpoint each lands on.
const FIRST: [&str; 8] = [
    "Write a long story about a cat who lives in Paris.",
    "Write a long story about a dog who learns to swim.",
    "Write a long story about a baker and his oven.",
    "Write a long story about a girl who finds a map.",
    "Write a long story about a ship lost at sea.",
    "Write a long story about a robot who plants trees.",
    "Write a long story about a fox in the snow.",
    "Write a long story about two friends on a train.",
];
/// Round 2: the second task of every session.
const SECOND: &str = "Continue the story with a long new chapter.";

/// What one task's turn cost: its main calls' usage and server timings, in order.
struct Task {
    calls: Vec<Usage>,
    timings: Vec<ModelTimings>,
    /// Time inside the model calls as loopd measured it (`ModelDone.model_us`).
    model_us: u64,
}

/// One round: every session's task and the wall time until the last ended.
struct Round {
    wall: Duration,
    tasks: Vec<Task>,
}

impl Round {
    fn sum(&self, field: fn(&Usage) -> u64) -> u64 {
        self.tasks
            .iter()
            .flat_map(|t| t.calls.iter())
            .map(field)
            .sum()
    }

    fn calls(&self) -> usize {
        self.tasks.iter().map(|t| t.calls.len()).sum()
    }
}

fn main() {
    let Some(parts) = RealParts::from_env() else {
        println!("endpoints_throughput: skipped (no real parts in the environment)");
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
        "{} sessions, llama-server -t 1 -c 6144 --parallel 3 each, SmolLM2-135M, \
         max_answer_tokens {MAX_ANSWER_TOKENS}",
        FIRST.len()
    );
    println!(
        "layout | round | wall s | main calls | generated tok | tok/s | prompt tok | cached tok | \
         cached % | in model calls s | calls at once | server ms/generated tok"
    );
    let mut walls = Vec::new();
    for servers in [1, 2] {
        walls.push(layout(&parts, servers));
    }
    let total = |w: &(Duration, Duration)| (w.0 + w.1).as_secs_f64();
    println!(
        "two endpoints vs one, both rounds: {:.2}x the throughput (wall {:.1} s vs {:.1} s)",
        total(&walls[0]) / total(&walls[1]),
        total(&walls[1]),
        total(&walls[0]),
    );
}

/// Runs both rounds on `servers` fresh llama-servers (so no layout starts with a cache the
/// other filled) behind a fresh loopd; prints a row per round and returns the rounds' walls.
fn layout(parts: &RealParts, servers: usize) -> (Duration, Duration) {
    let models: Vec<LlamaServer> = (0..servers)
        .map(|_| LlamaServer::start(&parts.llama_server, &parts.smollm2, &SERVER_ARGS).unwrap())
        .collect();
    let urls: Vec<&str> = models.iter().map(|m| m.url.as_str()).collect();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("loopd.sock");
    let _loopd = start_loopd(dir.path(), &socket, &urls);
    wait_until_up(&socket, servers);
    // Other work on the machine shows here: every figure below shares its cores.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "  load average before the {} layout: {}",
        servers,
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    let label = match servers {
        1 => "one endpoint",
        _ => "two endpoints",
    };
    let first = round(&socket, FIRST.iter().map(|t| t.to_string()).collect());
    print_row(label, 1, &first);
    let second = round(&socket, vec![SECOND.to_string(); FIRST.len()]);
    print_row(label, 2, &second);
    // A session whose turn 2 found its whole turn-1 prompt cached ran where its turn 1 did
    // (or the server's prompt cache restored it there).
    let kept = first
        .tasks
        .iter()
        .zip(&second.tasks)
        .filter(|(one, two)| {
            let before = one.calls.last().map_or(0, |u| u.prompt_tokens);
            two.calls.first().map_or(0, |u| u.cached_tokens) >= before
        })
        .count();
    println!(
        "  {label}: turn 2 found its session's whole turn-1 prompt cached in {kept} of {} sessions",
        FIRST.len()
    );
    let log = std::fs::read_to_string(dir.path().join(LOG)).unwrap_or_default();
    let count = |what: &str| log.lines().filter(|l| l.contains(what)).count();
    // "endpoint is up" shows the router's info lines reach the log, so 0 moves means none.
    println!(
        "  {label}: sessions per endpoint: {}; moves logged: {} ('endpoint is up' lines: {})",
        spread(&socket),
        count(MOVED),
        count(UP)
    );
    println!("  {label}: {}", accounts(&socket));
    (first.wall, second.wall)
}

/// Starts the release loopd on `urls` (one: `[llama] url`; more: `[[llama.endpoints]]`) with
/// fake tools and short answers, and waits (bounded) until its socket answers.
fn start_loopd(dir: &Path, socket: &Path, urls: &[&str]) -> Running {
    let mut config = format!(
        "socket = {socket:?}\nstate_dir = {:?}\n[llama]\nmax_answer_tokens = {MAX_ANSWER_TOKENS}\n",
        dir.join("state")
    );
    match urls {
        [url] => config.push_str(&format!("url = {url:?}\n")),
        _ => {
            for (name, url) in NAMES.iter().zip(urls) {
                config.push_str(&format!(
                    "[[llama.endpoints]]\nname = {name:?}\nurl = {url:?}\n"
                ));
            }
        }
    }
    config.push_str(&format!(
        "[baseline]\nsystem = {:?}\n",
        workspace_root().join("config/system.md")
    ));
    let path = dir.join("loopd.toml");
    std::fs::write(&path, config).unwrap();
    // loopd's log goes to a file (through a shell that execs it, so the pid is loopd's), with
    // the router's info lines: a session that moves endpoint is logged there.
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("exec \"$0\" --config \"$1\" 2>>\"$2\"")
        .arg(bin_dir().join("loopd"))
        .arg(&path)
        .arg(dir.join(LOG))
        .env("RUST_LOG", format!("{DAEMON_LOG_LEVEL},loopd::route=info"));
    let mut loopd = Running::start(command).unwrap();
    let deadline = Instant::now() + Duration::from_millis(READY_TIMEOUT_MS);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        if let Some(status) = loopd.exited() {
            panic!("loopd exited ({status}) before serving");
        }
        assert!(Instant::now() < deadline, "loopd's socket did not answer");
        std::thread::sleep(Duration::from_millis(20));
    }
    loopd
}

/// `boxctl --socket SOCKET --json ARGS...`, parsed; panics on a failure or a hang.
fn boxctl_json(socket: &Path, args: &[&str]) -> serde_json::Value {
    let mut command = Command::new(bin_dir().join("boxctl"));
    command.arg("--socket").arg(socket).arg("--json").args(args);
    let out = output_within(command, QUERY_LIMIT).unwrap_or_else(|hang| panic!("{hang}"));
    assert!(out.status.success(), "boxctl {args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The endpoints loopd lists in `boxctl status`.
fn endpoints(socket: &Path) -> Vec<serde_json::Value> {
    let status = boxctl_json(socket, &["status"]);
    status["llama"]["endpoints"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Waits (bounded) until loopd lists `count` endpoints, all up: a session routed before an
/// endpoint is seen up would go to the other one and skew the layout.
fn wait_until_up(socket: &Path, count: usize) {
    let deadline = Instant::now() + Duration::from_millis(READY_TIMEOUT_MS);
    loop {
        let list = endpoints(socket);
        if list.len() == count && list.iter().all(|e| e["state"] == "up") {
            return;
        }
        assert!(Instant::now() < deadline, "endpoints not up: {list:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `name: N, ...`: how many sessions keep to each endpoint.
fn spread(socket: &Path) -> String {
    endpoints(socket)
        .iter()
        .map(|e| format!("{}: {}", e["name"].as_str().unwrap_or("?"), e["sessions"]))
        .collect::<Vec<_>>()
        .join(", ")
}

/// loopd's usage accounts for today (`GET /v1/usage`, every role), as one line.
fn accounts(socket: &Path) -> String {
    let report = boxctl_json(socket, &["usage"]);
    let t = &report["totals"];
    format!(
        "GET /v1/usage (every role, both rounds): {} model calls, {} generated, {} evaluated, {} cached",
        t["model_calls"], t["generated_tokens"], t["evaluated_tokens"], t["cached_tokens"]
    )
}

/// Submits `texts[i]` to session `s{i}`, all at once (one `boxctl task` each), and waits for
/// every one to end; panics unless each turn ended done.
fn round(socket: &Path, texts: Vec<String>) -> Round {
    let started = Instant::now();
    let running: Vec<_> = texts
        .into_iter()
        .enumerate()
        .map(|(i, text)| {
            let mut command = Command::new(bin_dir().join("boxctl"));
            command.arg("--socket").arg(socket).args([
                "--json",
                "task",
                "--session",
                &format!("s{i}"),
                &text,
            ]);
            std::thread::spawn(move || output_within(command, TASK_LIMIT))
        })
        .collect();
    let outputs: Vec<_> = running
        .into_iter()
        .map(|t| t.join().unwrap().unwrap_or_else(|hang| panic!("{hang}")))
        .collect();
    let wall = started.elapsed();
    let tasks = outputs.iter().map(task_of).collect();
    Round { wall, tasks }
}

/// One `boxctl --json task` output: its main calls' usage; panics unless the turn ended done.
fn task_of(out: &std::process::Output) -> Task {
    let text = String::from_utf8_lossy(&out.stdout);
    let events: Vec<TurnEvent> = text
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
        "a task did not end done: {out:?}"
    );
    let mut task = Task {
        calls: Vec::new(),
        timings: Vec::new(),
        model_us: 0,
    };
    for event in &events {
        if let TurnEvent::ModelDone {
            usage,
            model_us,
            timings,
        } = event
        {
            task.calls.push(*usage);
            task.timings.extend(*timings);
            task.model_us += model_us;
        }
    }
    task
}

fn print_row(label: &str, n: u32, round: &Round) {
    let secs = round.wall.as_secs_f64();
    let generated = round.sum(|u| u.completion_tokens);
    let prompt = round.sum(|u| u.prompt_tokens);
    let cached = round.sum(|u| u.cached_tokens);
    let model_s = round.tasks.iter().map(|t| t.model_us).sum::<u64>() as f64 / 1e6;
    let timings = || round.tasks.iter().flat_map(|t| t.timings.iter());
    let predicted_ms: f64 = timings().map(|t| t.predicted_ms).sum();
    let predicted_n: u64 = timings().map(|t| t.predicted_n).sum();
    println!(
        "{label} | {n} | {secs:.1} | {} | {generated} | {:.1} | {prompt} | {cached} | {:.1} | \
         {model_s:.1} | {:.2} | {:.1}",
        round.calls(),
        generated as f64 / secs,
        cached as f64 * 100.0 / prompt.max(1) as f64,
        model_s / secs,
        predicted_ms / predicted_n.max(1) as f64,
    );
}
