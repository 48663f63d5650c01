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
    match outcome {
        Ok(missed) if !missed.is_empty() => {
            report.pass = false;
            report.failures.extend(missed);
        }
        Ok(_) => {}
        Err(e) => {
            report.pass = false;
            report.failures.insert(0, format!("the run failed: {e:#}"));
        }
    }
    report.log_dir = dir.display().to_string();
    report
}

/// Lays out, starts, drives and stops the task's stack; what its undo steps did not do.
fn drive(bench: &Bench, task: &Task, layout: &Layout) -> anyhow::Result<Vec<String>> {
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
    let mut missed = Vec::new();
    for step in &task.steps {
        match (&step.prompt, step.undo_turns) {
            (Some(prompt), _) => {
                let prompt = layout.fill(prompt);
                transcript.push_str(&format!("$ boxctl task {prompt}\n"));
                transcript.push_str(&stack.prompt(&prompt, task.setup.approvals)?);
            }
            (None, Some(turns)) => {
                transcript.push_str(&format!("$ boxctl undo --turns {turns}\n"));
                let said = stack.undo(turns)?;
                transcript.push_str(&said);
                for file in &step.undo_puts_back {
                    let path = layout.root.join(file);
                    if !said.contains(&path.display().to_string()) {
                        missed.push(format!("the undo did not put back {file}"));
                    }
                }
            }
            (None, None) => {
                transcript.push_str("$ boxctl compact\n");
                transcript.push_str(&stack.compact()?);
            }
        }
    }
    std::fs::write(layout.dir.join("transcript.txt"), transcript)?;
    stack.stop()?;
    Ok(missed)
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
