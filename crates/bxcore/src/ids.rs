//! Identifiers: sessions, client-named tasks and tool calls.

use crate::ValueError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The longest session id, in bytes.
pub const SESSION_ID_MAX_BYTES: usize = 64;

/// A session's name: 1 to 64 bytes of `[A-Za-z0-9._-]`, not starting with `.`.
///
/// It names a directory under the state dir, so the rules keep it a single, visible path
/// component (no `/`, no `..`, no hidden files).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

impl SessionId {
    /// Checks `s` against the rules and wraps it.
    pub fn new(s: &str) -> Result<SessionId, ValueError> {
        check_name("session id", s, SESSION_ID_MAX_BYTES)?;
        Ok(SessionId(s.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Checks that `s` is 1 to `max_bytes` bytes of `[A-Za-z0-9._-]` not starting with `.`; the
/// error names `what`.
pub(crate) fn check_name(what: &'static str, s: &str, max_bytes: usize) -> Result<(), ValueError> {
    let refuse = |why: String| Err(ValueError::new(what, why));
    if s.is_empty() {
        return refuse(format!(
            "it is empty; use 1 to {max_bytes} of A-Z a-z 0-9 . _ -"
        ));
    }
    if s.len() > max_bytes {
        return refuse(format!(
            "it is {} bytes long; the limit is {max_bytes}",
            s.len()
        ));
    }
    if s.starts_with('.') {
        return refuse(format!("{s:?} starts with '.'"));
    }
    if let Some(bad) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return refuse(format!(
            "{s:?} contains {bad:?}; only A-Z a-z 0-9 . _ - are allowed"
        ));
    }
    Ok(())
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for SessionId {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<SessionId, ValueError> {
        SessionId::new(s)
    }
}

impl TryFrom<String> for SessionId {
    type Error = ValueError;
    fn try_from(s: String) -> Result<SessionId, ValueError> {
        SessionId::new(&s)
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

/// The number of a tool call within a session: unique and increasing in its log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CallId(pub u64);

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The longest task id, in bytes: short enough that `task-<id>` is a session id.
pub const TASK_ID_MAX_BYTES: usize = 48;

/// A task's name chosen by its client (`TaskRequest::task_id`): 1 to 48 bytes of
/// `[A-Za-z0-9._-]`, not starting with `.`. A second submission of the same id in the same
/// session answers the first one's state instead of running again; the `User` record of the
/// task keeps it, so this holds across restarts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TaskId(String);

impl TaskId {
    /// Checks `s` against the rules and wraps it.
    pub fn new(s: &str) -> Result<TaskId, ValueError> {
        check_name("task id", s, TASK_ID_MAX_BYTES)?;
        Ok(TaskId(s.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for TaskId {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<TaskId, ValueError> {
        TaskId::new(s)
    }
}

impl TryFrom<String> for TaskId {
    type Error = ValueError;
    fn try_from(s: String) -> Result<TaskId, ValueError> {
        TaskId::new(&s)
    }
}

impl From<TaskId> for String {
    fn from(id: TaskId) -> String {
        id.0
    }
}
