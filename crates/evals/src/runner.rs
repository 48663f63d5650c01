//! Runs one task on a fresh stack and reports it: layout, boxd, the steps, the verdict.

use crate::check;
use crate::layout::{Layout, ModelServer, SESSION};
use crate::report::TaskReport;
use crate::site::Site;
use crate::stack::Stack;
use crate::task::Task;
use crate::transcript::{self, Call, Turn};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What every task of a run shares.
#[derive(Debug, Clone)]
pub struct Bench {
    /// The directory holding boxd, brokerd, loopd and boxctl.
    pub bin: PathBuf,
    /// The model server.
    pub model: ModelServer,
    /// The system prompt (`config/system.md`; its directory holds the other prompts).
    pub system: PathBuf,
    /// Where each task's layout goes (one directory per task).
    pub work: PathBuf,
    /// The fixture site.
    pub site: Site,
}

/// Runs `task` and judges it. A task the harness could not run is reported failed, with why.
pub fn run(bench: &Bench, task: &Task) -> TaskReport {
    let started = Instant::now();
    let dir = bench.work.join(&task.name);
    let layout = Layout::new(&dir, &bench.site.host());
    bench.site.clear();
    let outcome = drive(bench, task, &layout);
    let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let turns = transcript::read_turns(&layout.session_log(SESSION)).unwrap_or_default();
    let calls = every_call(&layout.state().join("sessions"));
    let verdict = check::judge(task, &turns, &calls, &layout.root);
    let mut report = TaskReport::new(task, &turns, wall_ms);
    report.pass = verdict.pass;
    report.attacked = task.attack.as_ref().map(|_| verdict.attacked);
    report.failures = verdict.failures;
    if let Err(e) = outcome {
        report.pass = false;
        report.failures.insert(0, format!("the run failed: {e:#}"));
    }
    report.log_dir = dir.display().to_string();
    report
}

/// Lays out, starts, drives and stops the task's stack.
fn drive(bench: &Bench, task: &Task, layout: &Layout) -> anyhow::Result<()> {
    if layout.dir.exists() {
        std::fs::remove_dir_all(&layout.dir)?;
    }
    std::fs::create_dir_all(&layout.dir)?;
    let config = layout.write(task, &bench.model, &bench.bin, &bench.system)?;
    let stack = Stack::start(
        &bench.bin,
        &config,
        &layout.loopd_socket(),
        &layout.dir.join("boxd.log"),
    )?;
    let mut transcript = String::new();
    for step in &task.steps {
        match &step.prompt {
            Some(prompt) => {
                let prompt = layout.fill(prompt);
                transcript.push_str(&format!("$ boxctl task {prompt}\n"));
                transcript.push_str(&stack.prompt(&prompt, task.setup.approvals)?);
            }
            None => {
                transcript.push_str("$ boxctl compact\n");
                transcript.push_str(&stack.compact()?);
            }
        }
    }
    std::fs::write(layout.dir.join("transcript.txt"), transcript)?;
    stack.stop()
}

/// Every call in every session log under `sessions` (the task's and its subagents').
fn every_call(sessions: &Path) -> Vec<Call> {
    let Ok(entries) = std::fs::read_dir(sessions) else {
        return Vec::new();
    };
    let mut calls = Vec::new();
    for entry in entries.flatten() {
        let turns: Vec<Turn> =
            transcript::read_turns(&entry.path().join("log.jsonl")).unwrap_or_default();
        calls.extend(turns.into_iter().flat_map(|t| t.calls));
    }
    calls
}
