//! `[loop]`, `[baseline]` and `[compact]`: how a turn runs and how a session's context is kept.

use bxconfig::Problems;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[loop]`: the limits of one turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Loop {
    /// The most model calls in one turn; the turn then ends as "max steps".
    pub max_steps: u32,
    /// The most bytes of one tool result put in the context; the rest is cut (on a character
    /// boundary, with `\n[truncated]`).
    pub tool_result_cap_bytes: usize,
    /// Whether the model may reason before answering (`chat_template_kwargs.enable_thinking`).
    /// Reasoning is streamed and logged but never replayed to the model.
    pub thinking: bool,
}

impl Default for Loop {
    fn default() -> Loop {
        Loop {
            max_steps: 32,
            tool_result_cap_bytes: 16_384,
            thinking: false,
        }
    }
}

impl Loop {
    pub(super) fn check(&self, p: &mut Problems) {
        p.at_least("loop.max_steps", self.max_steps, 1);
        p.at_least("loop.tool_result_cap_bytes", self.tool_result_cap_bytes, 1);
    }
}

/// `[baseline]`: the prompt files an epoch's baseline is made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Baseline {
    /// The system prompt (`system.md`). The other prompt files (`compact.md`, `summarise.md`,
    /// `heartbeat.md`, `subagent.md`) are read from the same directory.
    pub system: PathBuf,
}

impl Default for Baseline {
    fn default() -> Baseline {
        Baseline {
            system: PathBuf::from("/etc/boxmaker/system.md"),
        }
    }
}

impl Baseline {
    pub(super) fn check(&self, p: &mut Problems) {
        p.path_non_empty("baseline.system", &self.system);
    }
}

/// `[compact]`: when a session's context is compacted into a new epoch, and which tool results
/// are summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Compact {
    /// Compaction is due when the last prompt plus completion reach this fraction of the slot's
    /// `n_ctx`. Above 0, at most 1.
    pub threshold: f64,
    /// The tools whose results are summarised on the background slot (seed M5d-2).
    pub summarise: Vec<String>,
    /// The most characters of one summary.
    pub summary_chars: usize,
    /// The most characters of the carry a compaction leaves for the next epoch.
    pub carry_chars: usize,
    /// The most tokens of a compaction's answer (its `max_tokens`), and the room its request
    /// leaves for it: the epoch is cut, from measured token counts, until the request fits the
    /// slot with this much to spare. At most a quarter of the slot's `n_ctx` is used, whatever
    /// is set here.
    pub answer_tokens: u32,
    /// The tokens a turn's model call must leave free in the slot: a call whose prompt would
    /// leave fewer compacts the session first.
    pub turn_room_tokens: u32,
}

impl Default for Compact {
    fn default() -> Compact {
        Compact {
            threshold: 0.8,
            summarise: vec!["http_fetch".to_string()],
            summary_chars: 2_000,
            carry_chars: 8_000,
            answer_tokens: 1_024,
            turn_room_tokens: 256,
        }
    }
}

impl Compact {
    pub(super) fn check(&self, p: &mut Problems) {
        p.fraction("compact.threshold", self.threshold);
        for (i, tool) in self.summarise.iter().enumerate() {
            p.non_empty(&format!("compact.summarise[{i}]"), tool);
        }
        p.at_least("compact.summary_chars", self.summary_chars, 1);
        p.at_least("compact.carry_chars", self.carry_chars, 1);
        p.at_least("compact.answer_tokens", self.answer_tokens, 1);
    }
}
