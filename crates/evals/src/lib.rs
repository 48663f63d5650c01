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

#[cfg(test)]
mod tests {
    use super::*;

    /// The suite's own tasks: every file loads, there are at least 40, every category has at
    /// least three, and the quick subset is about eight.
    #[test]
    fn the_suites_tasks_all_load_and_cover_every_category() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals/tasks");
        let tasks = load_tasks(&dir, "*").unwrap();
        assert!(tasks.len() >= 40, "{} tasks", tasks.len());
        let mut per_category = std::collections::BTreeMap::new();
        for task in &tasks {
            *per_category.entry(task.category.name()).or_insert(0) += 1;
        }
        assert_eq!(per_category.len(), 10, "{per_category:?}");
        assert!(per_category.values().all(|n| *n >= 3), "{per_category:?}");
        let quick = tasks.iter().filter(|t| t.quick).count();
        assert!((8..=12).contains(&quick), "{quick} quick tasks");
    }

    #[test]
    fn a_glob_that_matches_nothing_is_an_error() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../evals/tasks");
        let e = load_tasks(&dir, "nothing-*").unwrap_err().to_string();
        assert!(e.contains("no task"), "{e}");
    }
}
