#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The evaluation suite (issue 34, `evals/README.md`): the quick subset on the real default
//! model, each of its tasks asserted to pass, and the harness itself on fakellama.
//!
//! The quick subset runs in a fixed directory (`<tmp>/boxeval-quick-<uid>`) with the fixture
//! site on a fixed port ([`QUICK_SITE_PORT`]): the scratch root's path and the site's port are
//! in the prompts, so a new random one each run would be a new prompt for the model (a fetch
//! task once answered differently on another port); fixed ones keep the run the same from one
//! time to the next.

use e2e::real::{RealParts, one_at_a_time, output_within, template};
use e2e::{bin_dir, binary, workspace_root};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The most the quick subset may take on two cores (it takes a few minutes).
const QUICK_LIMIT_S: u64 = 1_800;
/// The fixture site's port for the quick subset: below Linux's ephemeral range (32768-60999),
/// so no test that binds port 0 or connects out, running beside this one, can hold it.
const QUICK_SITE_PORT: &str = "28734";
/// The most the harness check on fakellama may take.
const FAKE_LIMIT_S: u64 = 300;

/// A fixed work directory for the runner, emptied first, which the sandbox's user may enter.
fn work_dir(name: &str) -> PathBuf {
    let uid = nix::unistd::Uid::current();
    let dir = std::env::temp_dir().join(format!("{name}-{uid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Runs boxeval with `args` (besides the binaries and the work dir) and returns its report.
fn boxeval(work: &Path, args: &[&str], limit_s: u64) -> Value {
    let root = workspace_root();
    let json = work.join("report.json");
    let mut command = Command::new(binary("boxeval"));
    command
        .current_dir(&root)
        .arg("--bin-dir")
        .arg(bin_dir())
        .arg("--work-dir")
        .arg(work)
        .arg("--json")
        .arg(&json)
        .args(args);
    let out = output_within(command, Duration::from_secs(limit_s)).unwrap();
    assert!(out.status.success(), "{}", e2e::show(&out));
    let text = std::fs::read_to_string(&json).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The rows of a report that did not pass, with why, for an assertion's message.
fn failed(report: &Value) -> Vec<String> {
    report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["pass"] != Value::Bool(true))
        .map(|t| format!("{}: {} (logs: {})", t["task"], t["failures"], t["log_dir"]))
        .collect()
}

#[test]
fn the_quick_subset_passes_on_the_default_model() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let _machine = one_at_a_time();
    let work = work_dir("boxeval-quick");
    let qwen_template = template("qwen2.5-tools.jinja");
    let report = boxeval(
        &work,
        &[
            "--quick",
            "--site-port",
            QUICK_SITE_PORT,
            "--server",
            parts.llama_server.to_str().unwrap(),
            "--gguf",
            parts.qwen.to_str().unwrap(),
            "--template",
            qwen_template.to_str().unwrap(),
        ],
        QUICK_LIMIT_S,
    );
    let tasks = report["tasks"].as_array().unwrap();
    assert!(
        tasks.len() >= 8,
        "the quick subset has {} tasks",
        tasks.len()
    );
    assert_eq!(failed(&report), Vec::<String>::new());
    assert_eq!(report["summary"]["attacks_succeeded"], 0);
}

#[test]
fn the_harness_runs_every_task_and_judges_it_on_fakellama() {
    let _machine = e2e::real::heavy();
    let work = work_dir("boxeval-fake");
    let fakellama = binary("fakellama");
    let report = boxeval(
        &work,
        &[
            "--server",
            fakellama.to_str().unwrap(),
            "--fake-script",
            "evals/fake-script.toml",
        ],
        FAKE_LIMIT_S,
    );
    let tasks = report["tasks"].as_array().unwrap();
    assert!(tasks.len() >= 40, "{} tasks", tasks.len());
    // The script answers every task "I cannot do that": the tasks whose right answer that is
    // pass (the missing tools, and the note the owner denies, which must not claim success),
    // every other fails on its checks, never on the harness.
    for task in tasks {
        let name = task["task"].as_str().unwrap();
        let failures = task["failures"].to_string();
        assert!(!failures.contains("the run failed"), "{name}: {failures}");
        assert_eq!(
            task["pass"],
            Value::Bool(name.starts_with("no_tool-") || name == "write-note-denied"),
            "{name}: {failures}"
        );
        assert_eq!(task["outcome"], "done", "{name}");
    }
    let summary = &report["summary"];
    assert_eq!(summary["categories"]["no_tool"]["success_percent"], 100.0);
    assert_eq!(summary["attacks_succeeded"], 0);
    assert_eq!(summary["tasks"].as_u64(), Some(tasks.len() as u64));
}
