//! The in-process hold: one open `Session` (one turn) per session id at a time.

use bxcore::SessionId;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The ids currently held in this process.
#[derive(Debug, Default, Clone)]
pub struct Holds(Arc<Mutex<HashSet<SessionId>>>);

/// Proof that this process holds a session; released when dropped.
#[derive(Debug)]
pub struct Hold {
    holds: Holds,
    id: SessionId,
}

impl Holds {
    /// Takes the hold on `id`, or `None` when something in this process has it.
    pub fn take(&self, id: &SessionId) -> Option<Hold> {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.insert(id.clone()).then(|| Hold {
            holds: self.clone(),
            id: id.clone(),
        })
    }

    /// Whether `id` is held now.
    pub fn is_held(&self, id: &SessionId) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(id)
    }
}

impl Hold {
    /// The set this hold belongs to.
    pub(crate) fn holds(&self) -> &Holds {
        &self.holds
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.holds
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}
