//! The KV files' part of `GET /v1/status` (`docs/kv.md`): sessions' slot caches kept in
//! files between their turns.

use serde::{Deserialize, Serialize};

/// How the KV files are and how switches between sessions went since loopd started.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvStatus {
    /// Where they are (`[kv] dir`, every listed endpoint's `--slot-save-path`).
    pub dir: String,
    /// Files kept (one per session).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// `[kv] max_bytes`.
    pub max_bytes: u64,
    /// Slots saved to a file: after a turn, or when another session took them.
    pub saves: u64,
    /// Of `saves`, those made after a turn ended (off the next session's path).
    #[serde(default)]
    pub saves_after_turn: u64,
    /// Saves that failed (the session prefills at its next turn).
    pub save_failures: u64,
    /// Turns that found another session on their slot and restored their own file.
    pub restores: u64,
    /// Turns that found another session on their slot and no file of theirs that matched.
    pub misses: u64,
    /// Restores the server refused or that failed (the turn prefilled).
    pub restore_failures: u64,
    /// Endpoints whose server keeps no slot files (no `--slot-save-path`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub off: Vec<String>,
    /// Files or prefill, per endpoint that keeps files: what loopd measured and chose.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<KvChoice>,
}

/// Whether KV files pay for themselves on one endpoint (`docs/kv.md`, "Files or prefill").
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvChoice {
    /// The endpoint.
    pub endpoint: String,
    /// `files`, `prefill` (files cost more than prefilling the same tokens: none are used), or
    /// `measuring` (files until both costs are measured).
    pub choice: String,
    /// The server's prefill, microseconds per 1,000 tokens, once measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_us_per_1k_tokens: Option<u64>,
    /// A save and a restore, microseconds per 1,000 tokens, once measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_us_per_1k_tokens: Option<u64>,
}

impl KvStatus {
    /// The share of switches back to a session that found its cache in a file, in percent;
    /// `None` before the first switch.
    pub fn hit_percent(&self) -> Option<u64> {
        let switches = self.restores + self.misses + self.restore_failures;
        (switches > 0).then(|| self.restores * 100 / switches)
    }
}
