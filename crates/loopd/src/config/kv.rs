//! `[kv]`: each session's KV cache kept in a file between its turns, so a session that comes
//! back to a slot another session used is restored instead of prefilled again (`docs/kv.md`).

use bxconfig::Problems;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The most KV files a `max_files` may allow.
pub const MAX_KV_FILES: usize = 4096;

/// `[kv]`: where the files live, for which endpoints, and how much they may take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Kv {
    /// Whether loopd saves and restores slots at all.
    pub enabled: bool,
    /// The directory: the `--slot-save-path` of every endpoint in `endpoints`, which loopd
    /// reads and prunes. Unset: `<state_dir>/kv`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// The endpoints (by name; the one `[llama] url` is `default`) whose `--slot-save-path`
    /// is `dir`. A remote endpoint writes on its own machine, where loopd cannot count or prune
    /// what it wrote: leave it out.
    pub endpoints: Vec<String>,
    /// The most bytes the files may take; past it the least recently used go first.
    pub max_bytes: u64,
    /// The most files (one per session); past it the least recently used go first.
    pub max_files: usize,
    /// Whether a slot other sessions use too is saved to its holder's file after each of its
    /// turns (off the next session's path), rather than when another session takes it.
    pub save_after_turn: bool,
}

impl Default for Kv {
    fn default() -> Kv {
        Kv {
            enabled: true,
            dir: None,
            endpoints: vec![super::DEFAULT_ENDPOINT_NAME.to_string()],
            max_bytes: 4 * 1024 * 1024 * 1024,
            max_files: 256,
            save_after_turn: true,
        }
    }
}

impl Kv {
    /// The directory of the files, under `state_dir` unless `dir` is set.
    pub fn dir_in(&self, state_dir: &Path) -> PathBuf {
        self.dir.clone().unwrap_or_else(|| state_dir.join("kv"))
    }

    pub(super) fn check(&self, p: &mut Problems) {
        if let Some(dir) = &self.dir {
            p.absolute_path("kv.dir", dir);
        }
        p.at_least("kv.max_bytes", self.max_bytes, 1024 * 1024);
        p.at_least("kv.max_files", self.max_files, 1);
        p.check(
            self.max_files <= MAX_KV_FILES,
            "kv.max_files",
            format!("must be at most {MAX_KV_FILES}"),
        );
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn on_for_the_default_endpoint_under_the_state_dir_by_default() {
        let kv = Kv::default();
        assert!(kv.enabled);
        assert_eq!(kv.endpoints, ["default"]);
        assert_eq!(kv.dir_in(Path::new("/s")), Path::new("/s/kv"));
        let mut p = Problems::new();
        kv.check(&mut p);
        assert!(p.finish().is_ok());
    }

    #[test]
    fn limits_and_the_directory_are_checked() {
        let kv = Kv {
            dir: Some(PathBuf::from("relative")),
            max_bytes: 10,
            max_files: 0,
            ..Kv::default()
        };
        let mut p = Problems::new();
        kv.check(&mut p);
        let keys: Vec<String> = p.finish().unwrap_err().into_iter().map(|p| p.key).collect();
        assert_eq!(keys, ["kv.dir", "kv.max_bytes", "kv.max_files"]);
    }
}
