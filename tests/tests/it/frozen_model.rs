#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A model server that freezes mid-answer (SIGSTOP) fails the turn once it has sent nothing
//! for `[llama] stall_timeout_ms`, not after the whole `request_timeout_ms` (issue 13).

use bxcore::{TurnEnd, TurnEvent};
use e2e::{Running, Stack, StackOptions, binary};
use std::process::Command;
use std::time::{Duration, Instant};

/// A reply that streams for seconds at the delay below.
const SLOW_SCRIPT: &str = r#"
[[rule]]
when_contains = "slow"
reply = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"
"#;
/// Per streamed chunk, in milliseconds.
const CHUNK_DELAY_MS: &str = "100";
/// loopd's stall limit here, in milliseconds.
const STALL_TIMEOUT_MS: u64 = 1_000;
/// loopd's request limit here, in milliseconds: what a frozen server held a turn for before.
const REQUEST_TIMEOUT_MS: u64 = 120_000;
/// The longest the turn may take to fail after the freeze: the stall limit and room for a
/// slow test machine, far under the request limit.
const FAILED_WITHIN_MS: u64 = STALL_TIMEOUT_MS + 9_000;

fn signal(pid: u32, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{name} {pid}");
}

#[test]
fn a_model_server_frozen_mid_answer_fails_the_turn_at_the_stall_limit() {
    let stack = Stack::start(StackOptions {
        script: SLOW_SCRIPT.to_string(),
        loopd_toml: format!(
            "[llama]\nstall_timeout_ms = {STALL_TIMEOUT_MS}\nrequest_timeout_ms = {REQUEST_TIMEOUT_MS}\n"
        ),
        fakellama_args: vec!["--delay-ms".into(), CHUNK_DELAY_MS.into()],
        ..StackOptions::default()
    })
    .unwrap();
    let mut command = Command::new(binary("boxctl"));
    command.arg("--socket").arg(&stack.socket).args([
        "--json",
        "task",
        "--session",
        "frozen",
        "be slow",
    ]);
    let task = Running::start(command).unwrap();
    assert!(task.wait_for_line(r#"{"type":"content""#).is_some());
    let model = stack.model.as_ref().unwrap().id();
    signal(model, "STOP");
    let frozen_at = Instant::now();
    let ended = task.wait_for_line(r#"{"type":"ended""#);
    let took = frozen_at.elapsed();
    signal(model, "CONT");
    let ended = ended.expect("the turn did not end");
    let event: TurnEvent = serde_json::from_str(&format!(r#"{{"type":"ended"{ended}"#)).unwrap();
    let TurnEvent::Ended {
        end: TurnEnd::Failed { reason },
        ..
    } = event
    else {
        panic!("{event:?}")
    };
    assert!(reason.contains("llama.stall_timeout_ms"), "{reason}");
    assert!(
        took < Duration::from_millis(FAILED_WITHIN_MS),
        "failed {took:?} after the freeze"
    );
}
