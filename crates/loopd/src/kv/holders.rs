//! Which session a slot last ran: a slot's place, its occupant, and whether the occupant's
//! file holds what the slot holds now.

use crate::llama::Client;
use crate::session::Session;
use bxcore::SessionId;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// A slot: its endpoint's name and its id there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Place {
    /// The endpoint's name.
    pub endpoint: Arc<str>,
    /// The slot id.
    pub slot: u32,
}

/// A session as a slot's cache holds it: which epoch, on which baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occupant {
    /// The session.
    pub session: SessionId,
    /// Its epoch.
    pub epoch: u32,
    /// The SHA-256 (hex) of the epoch's baseline; `None` before its first turn wrote one.
    pub baseline: Option<String>,
}

impl Occupant {
    /// `session` as it is now.
    pub fn of(session: &Session) -> Occupant {
        let baseline = session
            .current_baseline()
            .and_then(|b| serde_json::to_vec(b).ok())
            .map(|bytes| hex::encode(Sha256::digest(bytes)));
        Occupant {
            session: session.id().clone(),
            epoch: session.epoch(),
            baseline,
        }
    }
}

/// What a slot holds.
#[derive(Debug, Clone)]
pub(super) struct Held {
    /// Whose cache it is.
    pub occupant: Occupant,
    /// The client of the slot's endpoint.
    pub client: Client,
    /// Whether the occupant's file was saved from the slot since its last turn ended: then a
    /// switch need not save it again.
    pub saved: bool,
}

/// Every slot's holder, and the slots that more than one session has used.
#[derive(Debug, Default)]
pub(super) struct Holders {
    held: HashMap<Place, Held>,
    /// Slots another session took from their holder since loopd started: only there is a
    /// save after a turn worth its write, since only there is a holder ever switched out.
    switched: HashSet<Place>,
}

impl Holders {
    /// `now` takes `place` for a turn; what the slot held before.
    pub fn take(&mut self, place: &Place, client: &Client, now: &Occupant) -> Option<Held> {
        let before = self.held.insert(place.clone(), unsaved(now, client));
        // Its cache is here from now on: a slot it left keeps an older one, which must never
        // be saved over the file of the newer.
        self.held
            .retain(|p, held| p == place || held.occupant.session != now.session);
        if before
            .as_ref()
            .is_some_and(|held| held.occupant.session != now.session)
        {
            self.switched.insert(place.clone());
        }
        before
    }

    /// `now`'s turn at `place` ended: the slot holds it as it is now, unsaved. Whether a save
    /// now is worth its write (another session has used the slot).
    pub fn ended(&mut self, place: &Place, client: &Client, now: &Occupant) -> bool {
        self.held.insert(place.clone(), unsaved(now, client));
        self.switched.contains(place)
    }

    /// `occupant`'s file was saved from `place`: a switch need not save it again, as long as
    /// the slot still holds it as it was.
    pub fn saved(&mut self, place: &Place, occupant: &Occupant) {
        if let Some(held) = self.held.get_mut(place)
            && held.occupant == *occupant
        {
            held.saved = true;
        }
    }

    /// Forgets the slots `session` holds.
    pub fn forget(&mut self, session: &SessionId) {
        self.held
            .retain(|_, held| held.occupant.session != *session);
    }

    /// Every holder, taken out (at shutdown).
    pub fn drain(&mut self) -> Vec<(Place, Held)> {
        self.held.drain().collect()
    }
}

fn unsaved(occupant: &Occupant, client: &Client) -> Held {
    Held {
        occupant: occupant.clone(),
        client: client.clone(),
        saved: false,
    }
}
