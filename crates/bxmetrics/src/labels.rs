//! Label values that stay bounded over a daemon's whole life.
//!
//! A label whose values come from outside the config (a tool name an MCP server listed) must
//! not grow the series without end: a server that lists new names after each restart would
//! add series until the scraper chokes. [`BoundedLabels`] lets the first `max_values` distinct
//! names through as themselves and counts every later one as [`OTHER_LABEL`].

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};

/// The label value of every name past a [`BoundedLabels`]' limit.
pub const OTHER_LABEL: &str = "other";

/// The most distinct tool names a daemon labels its series with over its life; any later
/// name is [`OTHER_LABEL`].
pub const MAX_TOOL_LABEL_VALUES: usize = 256;

/// The values one label has taken, at most `max_values` of them; thread-safe.
#[derive(Debug)]
pub struct BoundedLabels {
    max_values: usize,
    seen: Mutex<HashSet<String>>,
}

impl BoundedLabels {
    /// A label that takes at most `max_values` distinct values (and [`OTHER_LABEL`]).
    pub fn new(max_values: usize) -> BoundedLabels {
        BoundedLabels {
            max_values,
            seen: Mutex::new(HashSet::new()),
        }
    }

    /// The label value for `name`: `name` itself when it was seen before or fewer than
    /// `max_values` distinct names were, else [`OTHER_LABEL`].
    pub fn label<'a>(&self, name: &'a str) -> &'a str {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.contains(name) {
            return name;
        }
        if seen.len() < self.max_values {
            seen.insert(name.to_owned());
            return name;
        }
        OTHER_LABEL
    }
}

#[cfg(test)]
mod tests;
