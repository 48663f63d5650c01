//! What the store knows of every session without reading its log: its record count and last
//! turn, kept up to date by every append (and every open, which may end a turn), built once from
//! the logs when first asked (the daemon asks at start). So `GET /v1/sessions` reads no log.

use bxcore::SessionId;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// One session as the index knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Its records so far, header included (0: its log could not be read).
    pub records: u64,
    /// Its highest turn number (0 for none).
    pub last_turn: u64,
    /// The turn that started and has not ended, if any: in a log nobody holds, one that loopd
    /// left unfinished when it stopped (the daemon ends it at start).
    pub open_turn: Option<u64>,
}

/// The index a store and its sessions share. `None` until built.
#[derive(Debug, Clone, Default)]
pub struct Index(Arc<Mutex<Option<BTreeMap<SessionId, Summary>>>>);

impl Index {
    fn lock(&self) -> MutexGuard<'_, Option<BTreeMap<SessionId, Summary>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that session `id` now has `summary` (nothing until the index is built: the
    /// build reads the log then).
    pub fn note(&self, id: &SessionId, summary: Summary) {
        if let Some(map) = self.lock().as_mut() {
            map.insert(id.clone(), summary);
        }
    }

    /// Every session and its summary, sorted by id; built first with `build` when it is not
    /// yet. The lock is held while building, so an append meanwhile waits and notes its
    /// summary after the build, never before.
    pub fn all<F>(&self, build: F) -> Vec<(SessionId, Summary)>
    where
        F: FnOnce() -> BTreeMap<SessionId, Summary>,
    {
        let mut guard = self.lock();
        let map = guard.get_or_insert_with(build);
        map.iter().map(|(id, s)| (id.clone(), *s)).collect()
    }

    /// Drops what was built, so the next [`Index::all`] builds again (after a failed build).
    pub fn forget(&self) {
        *self.lock() = None;
    }
}
