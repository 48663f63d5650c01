//! A warm turn through the daemons: fakellama (one short answer; on a Unix socket, as the
//! NixOS module runs llama-server, and on loopback TCP), brokerd and loopd already up
//! (release builds); each task is `POST /v1/tasks` on loopd's socket, its events read
//! until the stream ends (the turn's `ended`), as a client that is already running sees it
//! (no process start, unlike `boxctl task`). Measured in one session kept warm, and in a
//! new session each time (its directory, header and baseline made first).
//!
//! `cargo build --release -p brokerd -p loopd -p fakellama --bins &&
//! cargo bench -p e2e --bench warm_turn`

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

mod support;

use bytes::Bytes;
use e2e::workspace_root;
use http_body_util::{BodyExt, Full};
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};
use support::{fakellama, fakellama_on_socket, release, report, start_until, stop};

/// Tasks of each measure, after [`WARM_UP`] not counted.
const RUNS: usize = 200;
/// Tasks run first and not counted.
const WARM_UP: usize = 10;
/// brokerd's grants: the shipped config's manner, no `exec`.
const GRANTS: &str = "[[grants]]\ntool = \"clock\"\n[[grants]]\ntool = \"echo\"\n";

/// One task in `session`, its whole event stream read; how long it took.
async fn task(socket: &Path, session: &str) -> Duration {
    let body = serde_json::json!({"session": session, "text": "hello"}).to_string();
    let request = http::Request::post("/v1/tasks")
        .header("host", "loopd")
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let started = Instant::now();
    let response = bxhttp::client::send(socket, request).await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let events = response.into_body().collect().await.unwrap().to_bytes();
    let took = started.elapsed();
    let events = String::from_utf8_lossy(&events);
    assert!(events.contains("ended"), "{events}");
    took
}

/// brokerd and loopd against the model server at `llama_url`, started in `dir`; each
/// measure printed under `label`.
fn measure(dir: &Path, llama_url: &str, label: &str) {
    // Killed when dropped, at the end of the measure.
    let _brokerd = e2e::start_brokerd_with(Command::new(release("brokerd")), dir, GRANTS);
    let brokerd_socket = dir.join("brokerd.sock");
    let loopd_socket = dir.join("loopd.sock");
    let loopd_config = dir.join("loopd.toml");
    std::fs::write(
        &loopd_config,
        format!(
            "socket = {loopd_socket:?}\nstate_dir = {:?}\n[llama]\nurl = {llama_url:?}\n\
             [broker]\nsocket = {brokerd_socket:?}\n[baseline]\nsystem = {:?}\n",
            dir.join("loopd-state"),
            workspace_root().join("config/system.md"),
        ),
    )
    .unwrap();
    let mut command = Command::new(release("loopd"));
    command.arg("--config").arg(&loopd_config);
    let (loopd, _) = start_until(command, &loopd_socket);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let warm: Vec<Duration> = (0..WARM_UP + RUNS)
        .map(|_| rt.block_on(task(&loopd_socket, "warm")))
        .skip(WARM_UP)
        .collect();
    report(&format!("warm turn, one session, model on {label}"), warm);
    let new: Vec<Duration> = (0..WARM_UP + RUNS)
        .map(|n| rt.block_on(task(&loopd_socket, &format!("new-{n}"))))
        .skip(WARM_UP)
        .collect();
    report(&format!("turn in a new session, model on {label}"), new);
    report_bytes(
        &format!("bytes of each model call's body, model on {label}"),
        call_bytes(llama_url),
    );
    stop(loopd);
}

/// The body bytes of every chat request fakellama at `llama_url` recorded (as compact JSON,
/// as loopd sends it).
fn call_bytes(llama_url: &str) -> Vec<usize> {
    let request =
        b"GET /fakellama/requests HTTP/1.1\r\nhost: fakellama\r\nconnection: close\r\n\r\n";
    let mut answer = Vec::new();
    if let Some(path) = llama_url.strip_prefix("unix:") {
        let mut stream = std::os::unix::net::UnixStream::connect(path).unwrap();
        stream.write_all(request).unwrap();
        stream.read_to_end(&mut answer).unwrap();
    } else {
        let addr = llama_url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.write_all(request).unwrap();
        stream.read_to_end(&mut answer).unwrap();
    }
    let at = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let records: Vec<serde_json::Value> = serde_json::from_slice(&answer[at..]).unwrap();
    records
        .iter()
        .map(|record| serde_json::to_vec(&record["body"]).unwrap().len())
        .collect()
}

/// Prints `name: n=N p50=… max=… bytes`.
fn report_bytes(name: &str, mut samples: Vec<usize>) {
    samples.sort_unstable();
    println!(
        "{name}: n={} p50={} max={} bytes",
        samples.len(),
        samples[samples.len() / 2],
        samples[samples.len() - 1]
    );
}

fn main() {
    for (start, label) in [
        (fakellama_on_socket as fn(&Path) -> _, "a Unix socket"),
        (fakellama, "loopback TCP"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (mut model, llama_url) = start(dir.path());
        measure(dir.path(), &llama_url, label);
        let _ = model.kill();
        let _ = model.wait();
    }
}
