//! `[subagent]`: children that the model may hand a sub-task to (SPEC 6).

use bxconfig::Problems;
use serde::{Deserialize, Serialize};

/// `[subagent]`: whether the `subagent` tool is offered, and the limits of its children.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Subagent {
    /// Whether `subagent` is a core tool. Off by default: children run under brokerd's `sub-*`
    /// grants, which an operator sets up on purpose.
    pub enabled: bool,
    /// How deep children may nest: a session this many `sub-` levels down has no `subagent`
    /// tool. 1: children cannot spawn children.
    pub max_depth: u32,
    /// The most children one turn of a session may start; later calls are refused.
    pub max_children_per_turn: u32,
    /// The most model calls in one child's turn.
    pub max_steps: u32,
    /// The longest one child's turn may take, in milliseconds; it is then cancelled.
    pub timeout_ms: u64,
}

impl Default for Subagent {
    fn default() -> Subagent {
        Subagent {
            enabled: false,
            max_depth: 1,
            max_children_per_turn: 4,
            max_steps: 16,
            timeout_ms: 300_000,
        }
    }
}

impl Subagent {
    pub(super) fn check(&self, p: &mut Problems) {
        p.at_least("subagent.max_steps", self.max_steps, 1);
        p.at_least("subagent.timeout_ms", self.timeout_ms, 1);
    }
}
