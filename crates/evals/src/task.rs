//! One task of the suite as its file states it (`evals/README.md` is the format), read
//! strictly: an unknown key is an error naming it, so a typo never turns a check off.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The most bytes of one task file.
pub const MAX_TASK_FILE_BYTES: u64 = 256 * 1024;

/// What can be wrong with a task file.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The file could not be read.
    #[error("cannot read the task file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_TASK_FILE_BYTES`].
    #[error("the task file {path} is {bytes} bytes; at most {MAX_TASK_FILE_BYTES} are read")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// The file is not a task.
    #[error("the task file {path} is not a valid task: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What the parser or the checks said.
        message: String,
    },
}

/// What kind of owner's task it is: the summary's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Reading and finding in files.
    Read,
    /// Counting and sorting with `exec`.
    Exec,
    /// Fetching a page of the fixture site and answering from it.
    Fetch,
    /// Writing a note, under approval.
    Write,
    /// Several steps: read, compute, write.
    Multi,
    /// Facts given early, asked for after compactions.
    Compaction,
    /// A task no grant allows: the right answer says so.
    NoTool,
    /// A task for a subagent.
    Subagent,
    /// A long conversation.
    Long,
    /// A task whose page or file holds an injection.
    Attack,
}

impl Category {
    /// The name the files and the report use.
    pub fn name(self) -> &'static str {
        match self {
            Category::Read => "read",
            Category::Exec => "exec",
            Category::Fetch => "fetch",
            Category::Write => "write",
            Category::Multi => "multi",
            Category::Compaction => "compaction",
            Category::NoTool => "no_tool",
            Category::Subagent => "subagent",
            Category::Long => "long",
            Category::Attack => "attack",
        }
    }
}

/// How the runner answers a call that waits for the owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approvals {
    /// Approve it.
    Approve,
    /// Deny it.
    Deny,
    /// Leave it: it times out, which denies it.
    #[default]
    Ignore,
}

/// A task as its file states it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The file's stem (not in the file).
    #[serde(skip)]
    pub name: String,
    /// Its kind.
    pub category: Category,
    /// Whether the test command's quick subset runs it.
    #[serde(default)]
    pub quick: bool,
    /// One line on what it measures.
    #[serde(default)]
    pub about: String,
    /// What is there before the first prompt.
    #[serde(default)]
    pub setup: Setup,
    /// The conversation.
    pub steps: Vec<Step>,
    /// Checks on the end state.
    #[serde(default)]
    pub check: EndCheck,
    /// What shows an injection worked.
    #[serde(default)]
    pub attack: Option<Attack>,
}

/// The scratch root, the configs and memory before the first prompt.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// Files under the scratch root: relative path → content.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// brokerd TOML added to the runner's (grants).
    #[serde(default)]
    pub brokerd: String,
    /// loopd TOML merged over the runner's.
    #[serde(default)]
    pub loopd: String,
    /// Memory notes in place before the first turn.
    #[serde(default)]
    pub memory: Vec<String>,
    /// How calls waiting for the owner are answered.
    #[serde(default)]
    pub approvals: Approvals,
}

/// One step of the conversation: a prompt with its checks, or a compaction.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// The owner's words, one `boxctl task`.
    #[serde(default)]
    pub prompt: Option<String>,
    /// `boxctl compact` instead of a prompt.
    #[serde(default)]
    pub compact: bool,
    /// `boxctl undo --turns N` instead of a prompt.
    #[serde(default)]
    pub undo_turns: Option<u32>,
    /// With `undo_turns`: files (beneath the scratch root) the undo must put back; one it does
    /// not name fails the run.
    #[serde(default)]
    pub undo_puts_back: Vec<String>,
    /// Each in the turn's final answer.
    #[serde(default)]
    pub answer_contains: Vec<String>,
    /// At least one in the final answer, when not empty.
    #[serde(default)]
    pub answer_contains_any: Vec<String>,
    /// None in the final answer.
    #[serde(default)]
    pub answer_excludes: Vec<String>,
    /// The turn's model calls, at most.
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// How the turn must end (`done`, `max_steps`, ...).
    #[serde(default)]
    pub outcome: Option<String>,
}

/// Checks on the scratch root and the calls, after the last step.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndCheck {
    /// Each file exists and holds each string.
    #[serde(default)]
    pub files: BTreeMap<String, Vec<String>>,
    /// Each file holds exactly this (the owner's files as they were, after an undo).
    #[serde(default)]
    pub files_exact: BTreeMap<String, String>,
    /// None of these exists.
    #[serde(default)]
    pub files_absent: Vec<String>,
    /// Each was called and ran.
    #[serde(default)]
    pub tools_called: Vec<String>,
    /// None of these was called.
    #[serde(default)]
    pub tools_not_called: Vec<String>,
}

/// The injected actions of a task under attack.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attack {
    /// Files the injection asks for, under the scratch root.
    #[serde(default)]
    pub files: Vec<String>,
    /// Calls the injection asks for; one that ran is a success of the attack.
    #[serde(default)]
    pub calls: Vec<AttackCall>,
}

/// A call the injection asks for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttackCall {
    /// The tool that runs.
    pub tool: String,
    /// Text its arguments hold (case-insensitive); empty: any call of the tool.
    #[serde(default)]
    pub arguments_contain: String,
}

impl Task {
    /// Reads and checks the task in `path`; its name is the file's stem.
    pub fn load(path: &Path) -> Result<Task, TaskError> {
        let read = |source| TaskError::Read {
            path: path.to_path_buf(),
            source,
        };
        let bytes = std::fs::metadata(path).map_err(read)?.len();
        if bytes > MAX_TASK_FILE_BYTES {
            return Err(TaskError::TooLarge {
                path: path.to_path_buf(),
                bytes,
            });
        }
        let text = std::fs::read_to_string(path).map_err(read)?;
        let invalid = |message: String| TaskError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let mut task: Task = toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        task.name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        task.validate().map_err(invalid)?;
        Ok(task)
    }

    /// What the parser cannot check: every step is one thing, a task has a prompt, an attack
    /// task says what its attack is, and paths stay under the scratch root.
    fn validate(&self) -> Result<(), String> {
        if !self.steps.iter().any(|s| s.prompt.is_some()) {
            return Err("it has no step with a prompt".to_string());
        }
        for (i, step) in self.steps.iter().enumerate() {
            let kinds = [
                step.prompt.is_some(),
                step.compact,
                step.undo_turns.is_some(),
            ];
            if kinds.iter().filter(|k| **k).count() != 1 {
                return Err(format!(
                    "steps[{i}] must have exactly one of `prompt`, `compact = true` and \
                     `undo_turns`"
                ));
            }
            if step.undo_turns.is_none() && !step.undo_puts_back.is_empty() {
                return Err(format!(
                    "steps[{i}] has `undo_puts_back` without `undo_turns`"
                ));
            }
        }
        match (&self.attack, self.category) {
            (None, Category::Attack) => {
                return Err("an attack task needs an [attack] table".to_string());
            }
            (Some(a), Category::Attack) if a.files.is_empty() && a.calls.is_empty() => {
                return Err("[attack] names no file and no call".to_string());
            }
            (Some(_), c) if c != Category::Attack => {
                return Err("[attack] belongs to tasks of category \"attack\"".to_string());
            }
            _ => {}
        }
        let paths = self
            .setup
            .files
            .keys()
            .chain(self.check.files.keys())
            .chain(self.check.files_exact.keys())
            .chain(&self.check.files_absent)
            .chain(self.steps.iter().flat_map(|s| &s.undo_puts_back))
            .chain(self.attack.iter().flat_map(|a| &a.files));
        for path in paths {
            relative_path(path)?;
        }
        Ok(())
    }

    /// The prompts' steps, in order.
    pub fn prompts(&self) -> impl Iterator<Item = &Step> {
        self.steps.iter().filter(|s| s.prompt.is_some())
    }
}

/// `path` as a path relative to the scratch root, refused when it is absolute or climbs out.
pub fn relative_path(path: &str) -> Result<&Path, String> {
    let p = Path::new(path);
    let climbs = p
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_)));
    if path.is_empty() || climbs {
        return Err(format!(
            "the path {path:?} must be relative to the scratch root, without `..`"
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Task, TaskError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t-1.toml");
        std::fs::write(&path, text).unwrap();
        Task::load(&path)
    }

    #[test]
    fn a_task_is_named_by_its_file_and_read_whole() {
        let task = load(
            "category = \"read\"\nquick = true\n[setup]\nfiles = { \"a/b.txt\" = \"x\" }\n\
             [[steps]]\nprompt = \"hi\"\nanswer_contains = [\"x\"]\n[check]\n\
             files = { \"out.txt\" = [\"y\"] }\n",
        )
        .unwrap();
        assert_eq!(task.name, "t-1");
        assert_eq!(task.category, Category::Read);
        assert!(task.quick);
        assert_eq!(task.steps[0].answer_contains, ["x"]);
        assert_eq!(task.check.files["out.txt"], ["y"]);
    }

    #[test]
    fn an_unknown_key_is_refused_by_name() {
        let e = load("category = \"read\"\n[[steps]]\nprompt = \"hi\"\nanswer_contain = [\"x\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("answer_contain"), "{e}");
    }

    #[test]
    fn a_step_is_a_prompt_or_a_compaction_or_an_undo_never_two() {
        let e = load("category = \"read\"\n[[steps]]\nprompt = \"hi\"\ncompact = true\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exactly one"), "{e}");
        let e = load("category = \"read\"\n[[steps]]\nprompt = \"hi\"\nundo_turns = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("exactly one"), "{e}");
        let e = load("category = \"read\"\n[[steps]]\nprompt = \"hi\"\nundo_puts_back = [\"a\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("without `undo_turns`"), "{e}");
    }

    #[test]
    fn an_attack_task_says_what_its_attack_is() {
        let e = load("category = \"attack\"\n[[steps]]\nprompt = \"hi\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("[attack]"), "{e}");
    }

    #[test]
    fn paths_stay_under_the_scratch_root() {
        for bad in ["/etc/passwd", "../x", "a/../../x", ""] {
            let text = format!(
                "category = \"read\"\n[[steps]]\nprompt = \"hi\"\n[check]\nfiles_absent = [{bad:?}]\n"
            );
            let e = load(&text).unwrap_err().to_string();
            assert!(e.contains("relative to the scratch root"), "{bad}: {e}");
        }
    }
}
