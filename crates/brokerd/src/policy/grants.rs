//! Grants made ready to match: each grant's session globs compiled once, at start.

use crate::config::Grant;
use bxcore::SessionId;
use globset::{Glob, GlobSet, GlobSetBuilder};
use std::sync::Arc;

/// A grant whose session globs do not compile (the config check refuses them first).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("grants[{index}].sessions: {glob:?} is not a valid glob: {why}")]
pub struct GlobError {
    /// The grant's position in `[[grants]]`.
    pub index: usize,
    /// The glob.
    pub glob: String,
    /// What is wrong with it.
    pub why: String,
}

/// One grant and its compiled session globs.
#[derive(Debug, Clone)]
struct Rule {
    grant: Arc<Grant>,
    sessions: GlobSet,
}

/// Every grant, in config order, ready to match against a tool and a session.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    rules: Vec<Rule>,
}

impl Grants {
    /// Compiles `grants` (their `sessions` globs, globset syntax: `*`, `sub-*`, `heartbeat`).
    pub fn new(grants: &[Grant]) -> Result<Grants, GlobError> {
        let mut rules = Vec::with_capacity(grants.len());
        for (index, grant) in grants.iter().enumerate() {
            let mut builder = GlobSetBuilder::new();
            for glob in &grant.sessions {
                let compiled = Glob::new(glob).map_err(|e| GlobError {
                    index,
                    glob: glob.clone(),
                    why: e.kind().to_string(),
                })?;
                builder.add(compiled);
            }
            let sessions = builder.build().map_err(|e| GlobError {
                index,
                glob: grant.sessions.join(", "),
                why: e.to_string(),
            })?;
            rules.push(Rule {
                grant: Arc::new(grant.clone()),
                sessions,
            });
        }
        Ok(Grants { rules })
    }

    /// The grants that name `tool` and whose session globs match `session`, in config order.
    pub fn matching<'a>(
        &'a self,
        tool: &'a str,
        session: &'a SessionId,
    ) -> impl Iterator<Item = &'a Arc<Grant>> + 'a {
        self.rules
            .iter()
            .filter(move |rule| rule.grant.tool == tool && rule.sessions.is_match(session.as_str()))
            .map(|rule| &rule.grant)
    }

    /// Whether some grant lets `session` call `tool` (labels and rate limits aside).
    pub fn allows(&self, tool: &str, session: &SessionId) -> bool {
        self.matching(tool, session).next().is_some()
    }

    /// Every grant, in config order.
    pub fn iter(&self) -> impl Iterator<Item = &Grant> {
        self.rules.iter().map(|rule| rule.grant.as_ref())
    }
}
