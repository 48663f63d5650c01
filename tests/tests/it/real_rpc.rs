#![allow(clippy::unwrap_used, clippy::expect_used)]
//! llama.cpp RPC end to end (issue 20 item 4, docs/scale-out.md): a real `rpc-server` on
//! loopback, a real llama-server that puts the model on it (`--rpc`, `-ngl 99`), and a turn
//! through loopd, which talks to llama-server as it always does (the single `[llama] url`).
//! The parts come from `scripts/fetch-parts.sh`; without them the test says so and passes,
//! unless BOXMAKER_REQUIRE_REAL_MODEL=1.
//!
//! That the model really went through the worker is read from two places, both llama.cpp's own
//! output: llama-server's log names the buffer it loaded the weights into, and for a tensor
//! split across RPC that is `RPC0[127.0.0.1:PORT] model buffer size = N MiB` with N > 0 (the
//! weights live on the worker, so every token is computed there); and rpc-server prints
//! "Accepted client connection" (flushed) for each client.

use bxcore::{TurnEnd, TurnEvent};
use e2e::real::{LlamaServer, RealParts, boxctl_within, one_at_a_time};
use e2e::rpc::{ACCEPTED_LINE, RpcServer, rpc_server_from_env};
use e2e::{Stack, show};
use std::time::Duration;

/// The longest one `boxctl task` may take before the test calls it a hang.
const TASK_LIMIT: Duration = Duration::from_secs(180);

/// The MiB of model weights llama-server's log says it put on the RPC device `endpoint`, one
/// number per buffer (`load_tensors: RPC0[127.0.0.1:PORT] model buffer size = 52.07 MiB`).
fn rpc_buffers_mib(log: &str, endpoint: &str) -> Vec<f64> {
    let device = format!("[{endpoint}] model buffer size =");
    log.lines()
        .filter(|line| line.contains("RPC") && line.contains(&device))
        .filter_map(|line| {
            let size = line.rsplit('=').next()?.trim().strip_suffix("MiB")?;
            size.trim().parse().ok()
        })
        .collect()
}

#[test]
fn a_turn_runs_on_a_model_split_onto_an_rpc_worker() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let Some(rpc_server) = rpc_server_from_env() else {
        return;
    };
    let _one = one_at_a_time();
    // One thread each: the worker does the model's work, llama-server little beside it.
    let mut worker = RpcServer::start(&rpc_server, 1).unwrap();
    let endpoint = worker.endpoint();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("llama-server.log");
    // loopd's default [slots] are 0, 1 and 2, and it checks they exist: --parallel 3. -ngl 99
    // puts every layer on the worker. The buffer lines are logged at verbosity 4 (-lv 4) since
    // llama.cpp 0.3.36's tree.
    let mut args: Vec<&str> = "-c 3072 --parallel 3 --temp 0 --seed 7 -t 1 -ngl 99 -lv 4"
        .split(' ')
        .collect();
    args.extend(["--rpc", &endpoint]);
    let server = LlamaServer::start_logged(&parts.llama_server, &parts.smollm2, &args, &log)
        .unwrap_or_else(|e| {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            panic!("llama-server with --rpc {endpoint} did not start: {e}\n{text}")
        });

    let text = std::fs::read_to_string(&log).unwrap();
    let on_worker = rpc_buffers_mib(&text, &endpoint);
    assert!(
        !on_worker.is_empty() && on_worker.iter().all(|mib| *mib > 0.0),
        "llama-server's log does not show the weights on RPC0[{endpoint}]:\n{text}"
    );
    assert!(
        worker.running.wait_for_line(ACCEPTED_LINE).is_some(),
        "rpc-server did not print {ACCEPTED_LINE:?}"
    );

    let stack = Stack::with_model(dir, server.running, server.url, "").unwrap();
    let out = boxctl_within(
        &stack,
        &[
            "--json",
            "task",
            "--session",
            "rpc",
            "Say hello in one short sentence.",
        ],
        TASK_LIMIT,
    )
    .unwrap_or_else(|hang| panic!("{hang}"));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let events: Vec<TurnEvent> = String::from_utf8_lossy(&out.stdout)
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
    assert!(
        matches!(
            events.last(),
            Some(TurnEvent::Ended {
                end: TurnEnd::Done,
                ..
            })
        ),
        "{}",
        show(&out)
    );
    assert!(!answer.trim().is_empty(), "an empty answer: {}", show(&out));
    // The worker computed the turn (it holds the weights) and is still up after it.
    assert!(
        worker.running.exited().is_none(),
        "rpc-server exited during the turn"
    );
}

#[test]
fn the_log_parser_reads_the_buffers_of_one_worker_only() {
    let log = "load_tensors: offloaded 31/31 layers to GPU\n\
               load_tensors:   CPU_Mapped model buffer size =    11.25 MiB\n\
               load_tensors: RPC0[127.0.0.1:50052] model buffer size =    52.07 MiB\n\
               load_tensors: RPC1[127.0.0.1:50053] model buffer size =    40.00 MiB\n";
    assert_eq!(rpc_buffers_mib(log, "127.0.0.1:50052"), vec![52.07]);
    assert!(rpc_buffers_mib(log, "127.0.0.1:9").is_empty());
}
