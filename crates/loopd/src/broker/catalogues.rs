//! brokerd's catalogues as loopd last got them, by session, each with its version (brokerd's
//! `ETag`). A turn asks brokerd for its session's catalogue with the version held
//! (`If-None-Match`); brokerd answers `304` while it is unchanged, and the one held is used
//! without being sent or read again. brokerd decides every time: a catalogue held here is
//! used only on its `304`, never when brokerd cannot be asked.

use bxcore::SessionId;
use proto::Catalogue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The most sessions whose catalogue is held; past it, the one used longest ago goes.
pub const MAX_HELD_CATALOGUES: usize = 32;

/// One held catalogue.
struct Held {
    version: String,
    catalogue: Arc<Catalogue>,
    /// When it was last used, on [`Catalogues`]' own count of uses.
    used: u64,
}

/// The held catalogues, shared by a broker's clones.
#[derive(Default)]
pub struct Catalogues {
    held: Mutex<(HashMap<SessionId, Held>, u64)>,
}

impl std::fmt::Debug for Catalogues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner()).0.len();
        f.debug_struct("Catalogues").field("held", &held).finish()
    }
}

impl Catalogues {
    /// The version and catalogue held for `session`, if any.
    pub fn held(&self, session: &SessionId) -> Option<(String, Arc<Catalogue>)> {
        let mut guard = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let (held, uses) = &mut *guard;
        *uses += 1;
        let entry = held.get_mut(session)?;
        entry.used = *uses;
        Some((entry.version.clone(), Arc::clone(&entry.catalogue)))
    }

    /// Holds `catalogue` of `version` for `session`, in place of any other.
    pub fn hold(&self, session: &SessionId, version: String, catalogue: Arc<Catalogue>) {
        let mut guard = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let (held, uses) = &mut *guard;
        *uses += 1;
        if held.len() >= MAX_HELD_CATALOGUES && !held.contains_key(session) {
            let oldest = held
                .iter()
                .min_by_key(|(_, entry)| entry.used)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                held.remove(&oldest);
            }
        }
        let entry = Held {
            version,
            catalogue,
            used: *uses,
        };
        held.insert(session.clone(), entry);
    }

    /// Drops what is held for `session` (brokerd sent a catalogue without a version).
    pub fn forget(&self, session: &SessionId) {
        let mut guard = self.held.lock().unwrap_or_else(|p| p.into_inner());
        guard.0.remove(session);
    }

    /// How many catalogues are held.
    pub fn len(&self) -> usize {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).0.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn id(n: usize) -> SessionId {
        SessionId::new(&format!("s{n}")).unwrap()
    }

    fn catalogue(n: usize) -> Arc<Catalogue> {
        Arc::new(Catalogue {
            session: id(n),
            tools: Vec::new(),
        })
    }

    #[test]
    fn at_most_the_limit_is_held_and_the_one_used_longest_ago_goes() {
        let catalogues = Catalogues::default();
        for n in 0..MAX_HELD_CATALOGUES {
            catalogues.hold(&id(n), format!("v{n}"), catalogue(n));
        }
        // s0 is used again, so s1 is the one used longest ago.
        assert_eq!(catalogues.held(&id(0)).unwrap().0, "v0");
        catalogues.hold(&id(MAX_HELD_CATALOGUES), "new".into(), catalogue(0));
        assert_eq!(catalogues.len(), MAX_HELD_CATALOGUES);
        assert!(catalogues.held(&id(1)).is_none());
        assert!(catalogues.held(&id(0)).is_some());
        // A new version replaces the one held; forgetting drops it.
        catalogues.hold(&id(0), "v0b".into(), catalogue(0));
        assert_eq!(catalogues.held(&id(0)).unwrap().0, "v0b");
        catalogues.forget(&id(0));
        assert!(catalogues.held(&id(0)).is_none());
    }
}
