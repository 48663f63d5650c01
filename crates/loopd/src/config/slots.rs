//! `[slots]`: which llama-server slot serves which kind of work.

use bxconfig::Problems;
use serde::{Deserialize, Serialize};

/// `[slots]`: slot numbers (`id_slot`) by role, so background work never evicts the cached
/// prompt of the main slot. The three must differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Slots {
    /// The slot for turns.
    pub main: u32,
    /// The slot for summaries and compaction.
    pub background: u32,
    /// The slot for subagents.
    pub subagent: u32,
}

impl Default for Slots {
    fn default() -> Slots {
        Slots {
            main: 0,
            background: 1,
            subagent: 2,
        }
    }
}

impl Slots {
    /// The slots by role name, in a fixed order.
    pub fn by_role(&self) -> [(&'static str, u32); 3] {
        [
            ("main", self.main),
            ("background", self.background),
            ("subagent", self.subagent),
        ]
    }

    pub(super) fn check(&self, expected_slots: Option<u32>, p: &mut Problems) {
        let roles = self.by_role();
        for (i, (role, slot)) in roles.iter().enumerate() {
            if let Some((other, _)) = roles[..i].iter().find(|(_, s)| s == slot) {
                p.push(
                    format!("slots.{role}"),
                    format!("slot {slot} is already slots.{other}: each role needs its own slot"),
                );
            }
            if let Some(n) = expected_slots {
                p.check(
                    *slot < n,
                    format!("slots.{role}"),
                    format!(
                        "slot {slot} does not exist: expect.slots is {n} (slots 0 to {})",
                        n.saturating_sub(1)
                    ),
                );
            }
        }
    }
}
