//! Which session a slot last ran: a slot's place and its occupant.

use crate::session::Session;
use bxcore::SessionId;
use sha2::{Digest, Sha256};
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
