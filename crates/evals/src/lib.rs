//! The evaluation suite's runner (issue 34): the owner's tasks of `evals/tasks/` run one by one
//! on the real stack (boxd's development layout: a real llama-server, brokerd with the task's
//! grants, loopd), driven with the real `boxctl`, and judged from the session logs and the
//! scratch root. `evals/README.md` is the task format; `docs/evals.md` holds the figures.
//!
//! - `task`: a task file, read strictly;
//! - `site`: the fixture web site on loopback;
//! - `layout`: one task's directory and configs;
//! - `stack`: boxd started, driven with boxctl, stopped;
//! - `transcript`: what the session logs say each turn did;
//! - `check`: the verdicts;
//! - `runner`: one task from layout to verdict;
//! - `report`: the table, the summary and the JSON report.

pub mod check;
pub mod layout;
pub mod report;
pub mod runner;
pub mod site;
pub mod stack;
pub mod task;
pub mod transcript;

use std::path::{Path, PathBuf};

/// The tasks in `dir` whose names match `glob`, sorted by name.
pub fn load_tasks(dir: &Path, glob: &str) -> anyhow::Result<Vec<task::Task>> {
    let matcher = globset::Glob::new(glob)
        .map_err(|e| anyhow::anyhow!("--tasks {glob:?} is not a glob: {e}"))?
        .compile_matcher();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot list the tasks in {}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let mut tasks = Vec::new();
    for path in paths {
        let task = task::Task::load(&path)?;
        if matcher.is_match(&task.name) {
            tasks.push(task);
        }
    }
    if tasks.is_empty() {
        anyhow::bail!("no task in {} matches {glob:?}", dir.display());
    }
    Ok(tasks)
}
