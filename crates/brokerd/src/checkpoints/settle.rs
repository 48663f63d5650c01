//! What a crash left of an exec under `rw_paths`, settled once at the store's open: each file
//! in `running/` is a snapshot run's manifest ([`super::runs`]) or an overlay run's journal
//! ([`super::layers`]), settled and removed; then the stages left are removed.

use super::layers::{self, JOURNAL_SUFFIX};
use super::runs::{self, RUNNING, remove};
use super::{CheckpointError, Checkpoints};

/// Settles `running/` and the stages (see the module).
pub(super) fn settle(store: &Checkpoints) -> Result<(), CheckpointError> {
    let dir = store.dir().join(RUNNING);
    let entries = std::fs::read_dir(&dir).map_err(|source| CheckpointError::Io {
        what: "read",
        path: dir.clone(),
        source,
    })?;
    for entry in entries.flatten() {
        let file = entry.path();
        if file.to_string_lossy().ends_with(JOURNAL_SUFFIX) {
            layers::settle_journal(store, &file);
        } else {
            runs::settle_manifest(store, &file);
        }
        remove(&file)?;
    }
    layers::remove_left_stages(store);
    Ok(())
}
