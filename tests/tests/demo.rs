#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The README's main job, end to end: `scripts/demo.sh` with the binaries this test run built:
//! a model server, brokerd, loopd, and two boxctl tasks, one answered with loopd's clock and
//! one with brokerd's echo found through find_tool/call_tool.

use e2e::real::{RealParts, one_at_a_time};
use e2e::{bin_dir, workspace_root};
use std::process::{Command, Output};

fn demo(model: &str) -> (Output, String) {
    let dev = tempfile::tempdir().unwrap();
    let out = Command::new(workspace_root().join("scripts/demo.sh"))
        .env("BOXMAKER_MODEL", model)
        .env("BOXMAKER_BIN_DIR", bin_dir())
        .env("BOXMAKER_DEV_DIR", dev.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(dev.path().join("state/sessions").is_dir());
    assert!(
        dev.path().join("brokerd/audit.jsonl").is_file(),
        "brokerd audited the echo"
    );
    (out, stdout)
}

#[test]
fn the_demo_runs_tasks_with_tool_calls_on_the_double() {
    let (_, stdout) = demo("fake");
    assert!(stdout.contains("→ clock {}"), "{stdout}");
    assert!(stdout.contains("The echo tool said: banana."), "{stdout}");
    assert!(stdout.contains("turn 1 ended: done"), "{stdout}");
    assert!(stdout.contains("turn 2 ended: done"), "{stdout}");
}

#[test]
fn the_demo_runs_tasks_with_tool_calls_on_the_real_model() {
    // The script fetches (or finds cached) its parts itself; this only says whether a run
    // without them should skip.
    if RealParts::from_env().is_none() {
        return;
    }
    let _one = one_at_a_time();
    let (_, stdout) = demo("qwen");
    assert!(stdout.contains("→ clock"), "{stdout}");
    assert!(stdout.contains("(call 2): banana"), "{stdout}");
    assert!(stdout.contains("turn 2 ended: done"), "{stdout}");
}
