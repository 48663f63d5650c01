//! What a run found: one row per task, the summary (success overall and per category, attack
//! success, median time and tokens per task), as a table on the terminal and as JSON.

use crate::task::{Category, Task};
use crate::transcript::Turn;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One task's row.
#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    /// The task's name.
    pub task: String,
    /// Its category.
    pub category: Category,
    /// Every check held (utility).
    pub pass: bool,
    /// For a task under attack: whether the injected action happened.
    pub attacked: Option<bool>,
    /// Model calls over all its turns.
    pub steps: u32,
    /// Prompt tokens the server evaluated.
    pub tokens_evaluated: u64,
    /// Tokens generated.
    pub tokens_generated: u64,
    /// Wall time of the whole task (stack start to stop), in milliseconds.
    pub wall_ms: u64,
    /// How its last turn ended.
    pub outcome: String,
    /// The checks that failed.
    pub failures: Vec<String>,
    /// Where its configs, logs and transcript are.
    pub log_dir: String,
}

impl TaskReport {
    /// The row of `task` from its turns; verdicts are filled in by the caller.
    pub fn new(task: &Task, turns: &[Turn], wall_ms: u64) -> TaskReport {
        TaskReport {
            task: task.name.clone(),
            category: task.category,
            pass: false,
            attacked: None,
            steps: turns.iter().map(|t| t.model_calls).sum(),
            tokens_evaluated: turns.iter().map(|t| t.evaluated_tokens).sum(),
            tokens_generated: turns.iter().map(|t| t.generated_tokens).sum(),
            wall_ms,
            outcome: turns
                .last()
                .map(|t| t.end.clone())
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "none".to_string()),
            failures: Vec::new(),
            log_dir: String::new(),
        }
    }
}

/// One category's line of the summary.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CategoryLine {
    /// Tasks run.
    pub tasks: usize,
    /// Tasks passed.
    pub passed: usize,
    /// passed / tasks, in percent.
    pub success_percent: f64,
}

/// The summary of a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    /// Tasks run.
    pub tasks: usize,
    /// Tasks passed.
    pub passed: usize,
    /// passed / tasks, in percent.
    pub success_percent: f64,
    /// Per category.
    pub categories: BTreeMap<String, CategoryLine>,
    /// Tasks under attack.
    pub attack_tasks: usize,
    /// Of them, those whose injected action happened.
    pub attacks_succeeded: usize,
    /// attacks_succeeded / attack_tasks, in percent.
    pub attack_success_percent: f64,
    /// Median wall time per task, in milliseconds.
    pub median_wall_ms: u64,
    /// Median tokens (evaluated + generated) per task.
    pub median_tokens: u64,
    /// Tasks whose last turn ended without an answer (not `done`).
    pub without_answer: usize,
}

/// The whole report, as `--json` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The model the run used.
    pub model: String,
    /// The rows.
    pub tasks: Vec<TaskReport>,
    /// The summary.
    pub summary: Summary,
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        return 0.0;
    }
    (part as f64 * 1000.0 / whole as f64).round() / 10.0
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values.get(values.len() / 2).copied().unwrap_or(0)
}

/// The summary of `rows`.
pub fn summarise(rows: &[TaskReport]) -> Summary {
    let mut categories: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for row in rows {
        let entry = categories
            .entry(row.category.name().to_string())
            .or_default();
        entry.0 += 1;
        entry.1 += usize::from(row.pass);
    }
    let passed = rows.iter().filter(|r| r.pass).count();
    let attack_tasks = rows.iter().filter(|r| r.attacked.is_some()).count();
    let attacks_succeeded = rows.iter().filter(|r| r.attacked == Some(true)).count();
    Summary {
        tasks: rows.len(),
        passed,
        success_percent: percent(passed, rows.len()),
        categories: categories
            .into_iter()
            .map(|(name, (tasks, passed))| {
                let line = CategoryLine {
                    tasks,
                    passed,
                    success_percent: percent(passed, tasks),
                };
                (name, line)
            })
            .collect(),
        attack_tasks,
        attacks_succeeded,
        attack_success_percent: percent(attacks_succeeded, attack_tasks),
        median_wall_ms: median(rows.iter().map(|r| r.wall_ms).collect()),
        median_tokens: median(
            rows.iter()
                .map(|r| r.tokens_evaluated + r.tokens_generated)
                .collect(),
        ),
        without_answer: rows.iter().filter(|r| r.outcome != "done").count(),
    }
}

/// The table header.
pub fn header() -> String {
    format!(
        "{:<34} {:<10} {:<5} {:<7} {:>5} {:>8} {:>6} {:>8}  {}",
        "task", "category", "pass", "attack", "steps", "eval", "gen", "wall_s", "outcome"
    )
}

/// One row of the table.
pub fn row(r: &TaskReport) -> String {
    let attack = match r.attacked {
        None => "-",
        Some(true) => "HIT",
        Some(false) => "held",
    };
    format!(
        "{:<34} {:<10} {:<5} {:<7} {:>5} {:>8} {:>6} {:>8.1}  {}",
        r.task,
        r.category.name(),
        if r.pass { "yes" } else { "NO" },
        attack,
        r.steps,
        r.tokens_evaluated,
        r.tokens_generated,
        r.wall_ms as f64 / 1000.0,
        r.outcome
    )
}

/// The summary as text.
pub fn summary_text(s: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "success: {}/{} ({}%); attack success: {}/{} ({}%); median {:.1} s and {} tokens a task; \
         {} ended without an answer",
        s.passed,
        s.tasks,
        s.success_percent,
        s.attacks_succeeded,
        s.attack_tasks,
        s.attack_success_percent,
        s.median_wall_ms as f64 / 1000.0,
        s.median_tokens,
        s.without_answer
    );
    for (name, line) in &s.categories {
        let _ = writeln!(
            out,
            "  {name:<10} {}/{} ({}%)",
            line.passed, line.tasks, line.success_percent
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row_of(category: Category, pass: bool, attacked: Option<bool>, wall_ms: u64) -> TaskReport {
        TaskReport {
            task: "t".into(),
            category,
            pass,
            attacked,
            steps: 2,
            tokens_evaluated: 100,
            tokens_generated: wall_ms,
            wall_ms,
            outcome: if pass { "done" } else { "max_steps" }.into(),
            failures: Vec::new(),
            log_dir: String::new(),
        }
    }

    #[test]
    fn the_summary_counts_per_category_and_attacks_apart() {
        let rows = [
            row_of(Category::Read, true, None, 10),
            row_of(Category::Read, false, None, 30),
            row_of(Category::Attack, true, Some(false), 20),
            row_of(Category::Attack, false, Some(true), 40),
        ];
        let s = summarise(&rows);
        assert_eq!((s.tasks, s.passed), (4, 2));
        assert_eq!(s.success_percent, 50.0);
        assert_eq!(s.categories["read"].passed, 1);
        assert_eq!(s.categories["attack"].tasks, 2);
        assert_eq!((s.attack_tasks, s.attacks_succeeded), (2, 1));
        assert_eq!(s.median_wall_ms, 30);
        assert_eq!(s.median_tokens, 130);
        assert_eq!(s.without_answer, 2);
        let text = summary_text(&s);
        assert!(text.contains("success: 2/4 (50%)"), "{text}");
        assert!(row(&rows[3]).contains("HIT"));
    }
}
