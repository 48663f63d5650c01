#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The README's main job, end to end: the fakellama binary with the demo script, driven by the
//! `converse` client, streams both scripted answers and reuses its cache on the second turn.

use e2e::{Running, bin_dir, binary, workspace_root};
use std::process::Command;

#[test]
fn the_demo_conversation_streams_and_reuses_the_cache() {
    let mut command = Command::new(binary("fakellama"));
    command
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--script")
        .arg(workspace_root().join("config/demo-script.toml"));
    let server = Running::start(command).unwrap();
    let addr = server
        .wait_for_line("fakellama listening on ")
        .expect("fakellama printed its address");

    // `cargo test` builds the examples with the tests.
    let converse = bin_dir().join("examples/converse");
    let out = Command::new(&converse)
        .arg(format!("http://{addr}"))
        .arg("Hello! Who are you?")
        .arg("And what can you do?")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", converse.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("I am fakellama, a scripted double"), "{text}");
    assert!(text.contains("I can follow a script"), "{text}");
    let reused: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split(" tokens: ").nth(1))
        .map(|rest| rest.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(reused.len(), 2, "{text}");
    assert_eq!(reused[0], 0, "a cold slot reuses nothing: {text}");
    assert!(
        reused[1] > 100,
        "turn 2 reuses turn 1's prompt and answer: {text}"
    );
}
