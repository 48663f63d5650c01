//! `[memory]`: which durable notes go into the baseline of later epochs and new sessions.

use bxconfig::Problems;
use serde::{Deserialize, Serialize};

/// `[memory]`: the notes compactions leave in `<state_dir>/memory.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Memory {
    /// The most characters of notes put into one baseline; the newest notes are kept.
    pub max_chars: usize,
    /// Whether notes made from untrusted text go into baselines (they would make every
    /// session that reads them untrusted).
    pub accept_untrusted: bool,
}

impl Default for Memory {
    fn default() -> Memory {
        Memory {
            max_chars: 4_000,
            accept_untrusted: false,
        }
    }
}

impl Memory {
    pub(super) fn check(&self, p: &mut Problems) {
        p.at_least("memory.max_chars", self.max_chars, 1);
    }
}
