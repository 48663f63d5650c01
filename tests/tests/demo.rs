#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The README's main job, end to end: `scripts/demo.sh` with the binaries this test run
//! built: fakellama as the model, loopd, and two boxctl tasks, one with a tool call.

use e2e::{bin_dir, workspace_root};
use std::process::Command;

#[test]
fn the_demo_runs_a_task_with_a_tool_call_and_shows_the_log() {
    let dev = tempfile::tempdir().unwrap();
    let out = Command::new(workspace_root().join("scripts/demo.sh"))
        .env("BOXMAKER_BIN_DIR", bin_dir())
        .env("BOXMAKER_DEV_DIR", dev.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("→ clock {}"), "{stdout}");
    assert!(stdout.contains("I asked the clock tool"), "{stdout}");
    assert!(stdout.contains("turn 1 ended: done"), "{stdout}");
    assert!(stdout.contains("turn 2 ended: done"), "{stdout}");
    assert!(dev.path().join("state/sessions").is_dir());
}
