//! `[approvals]`: how long a turn waits for the owner's answer to a call brokerd asks about
//! (`docs/approvals.md`).

use bxconfig::Problems;
use serde::{Deserialize, Serialize};

/// `[approvals]`: the wait for the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Approvals {
    /// How long a turn waits for the owner's answer, in milliseconds; then the call is denied
    /// ("no answer from the owner in 10m") and the turn goes on. Never longer than brokerd
    /// holds the approval (its `expires_in_ms`).
    pub timeout_ms: u64,
}

impl Default for Approvals {
    fn default() -> Approvals {
        Approvals {
            timeout_ms: 600_000,
        }
    }
}

impl Approvals {
    pub(super) fn check(&self, p: &mut Problems) {
        p.at_least("approvals.timeout_ms", self.timeout_ms, 1);
    }
}
