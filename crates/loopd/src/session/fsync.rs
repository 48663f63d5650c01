//! Durable file operations: what is written here is on disk before the call returns.

use super::StoreError;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many syncs (`fsync`, `fdatasync`, of files and directories) a store and the sessions it
/// opened made: what a turn costs the disk, counted for tests and benches.
#[derive(Debug, Clone, Default)]
pub struct Syncs(Arc<AtomicU64>);

impl Syncs {
    /// The syncs so far.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// One more.
    pub(super) fn one(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Flushes a directory's entries (a created or renamed file's name) to disk.
pub fn sync_dir(dir: &Path, syncs: &Syncs) -> Result<(), StoreError> {
    syncs.one();
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io(dir, e))
}

/// What the name of a durable write's temporary file holds before the writer's pid:
/// `<name>.tmp.<pid>` (stored outputs use the same form).
pub const TEMP_INFIX: &str = ".tmp.";

/// Whether `name` is the name of a durable write's temporary file (`<name>.tmp.<pid>`): one
/// that a crash left is removed at start.
pub fn is_temp_name(name: &str) -> bool {
    name.rsplit_once(TEMP_INFIX).is_some_and(|(stem, pid)| {
        !stem.is_empty() && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Writes `bytes` to a new file at `target`, durably and atomically: a temporary file is
/// written and synced, then hard-linked into place, which fails if `target` exists. The
/// caller syncs the directory.
pub fn write_new_file(target: &Path, bytes: &[u8], syncs: &Syncs) -> Result<(), StoreError> {
    let tmp = target.with_extension(format!("tmp.{}", std::process::id()));
    let result = (|| {
        let mut file = File::create(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
        file.write_all(bytes).map_err(|e| StoreError::io(&tmp, e))?;
        syncs.one();
        file.sync_all().map_err(|e| StoreError::io(&tmp, e))?;
        std::fs::hard_link(&tmp, target).map_err(|e| StoreError::io(target, e))
    })();
    // The temporary name is ours alone; a failure to remove it leaves only a stray file.
    let _ = std::fs::remove_file(&tmp);
    result
}

/// Replaces the file at `target` with `bytes`, durably and atomically: a temporary file
/// (`<name>.tmp.<pid>`) is written and synced, renamed over `target`, and the directory
/// synced, so a crash at any point leaves the old file or the new one. Stored outputs and the
/// schedules' state are written so.
pub fn replace_file(target: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(format!("{TEMP_INFIX}{}", std::process::id()));
    let tmp = target.with_file_name(name);
    let written = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if written.is_err() {
        // The temporary name is ours alone; failing to remove it leaves only a stray file.
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    let dir = target.parent().unwrap_or(Path::new("."));
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_replaced_file_holds_the_new_bytes_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("state.json");
        replace_file(&target, b"old").unwrap();
        replace_file(&target, b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["state.json"]);
        let missing_dir = dir.path().join("gone").join("state.json");
        assert!(replace_file(&missing_dir, b"x").is_err());
    }

    #[test]
    fn temporary_names_are_told_from_others() {
        for temp in ["log.tmp.4242", "baseline-1.tmp.7", "out-3.json.tmp.12"] {
            assert!(is_temp_name(temp), "{temp}");
        }
        for other in [
            "log.jsonl",
            "notes.tmp.txt",
            ".tmp.12",
            "log.tmp.",
            "tmp.12",
        ] {
            assert!(!is_temp_name(other), "{other}");
        }
    }
}
