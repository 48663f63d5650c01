//! Sessions kept open between tasks: a session's next task starts from the open, verified
//! `Session` its last one left, instead of reading and verifying its whole log again. At most
//! [`MAX_IDLE_SESSIONS`] are kept (the least recently used goes first; each holds its records
//! in memory and its log's lock). Only a session in a clean state is kept: no turn open, no
//! failed write; any other is dropped, and its next task opens it from disk, which recovers it.

use crate::session::{Session, Store, StoreError};
use bxcore::SessionId;
use std::collections::VecDeque;
use std::sync::Mutex;

/// The most sessions kept open with no task running on them.
pub const MAX_IDLE_SESSIONS: usize = 64;

/// The sessions kept open, least recently used first.
#[derive(Debug, Default)]
pub(super) struct IdleSessions(Mutex<VecDeque<Session>>);

impl IdleSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Session>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Session `id`: the one kept open, or opened from `store` (created first when `create`).
    pub fn open(&self, store: &Store, id: &SessionId, create: bool) -> Result<Session, StoreError> {
        let kept = {
            let mut idle = self.lock();
            idle.iter()
                .position(|s| s.id() == id)
                .and_then(|at| idle.remove(at))
        };
        match kept {
            Some(session) => Ok(session),
            None if create => store.open_or_create(id),
            None => store.open(id),
        }
    }

    /// Closes every session kept open (at shutdown).
    pub fn close_all(&self) {
        self.lock().clear();
    }

    /// Keeps `session` open for its next task, when it is in a clean state.
    pub fn keep(&self, session: Session) {
        if session.open_turn().is_some() || session.is_poisoned() {
            return;
        }
        let mut idle = self.lock();
        idle.push_back(session);
        while idle.len() > MAX_IDLE_SESSIONS {
            idle.pop_front();
        }
    }
}
