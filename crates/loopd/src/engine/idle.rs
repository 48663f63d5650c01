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

/// The sessions kept open, least recently used first; none once closed (at shutdown).
#[derive(Debug, Default)]
pub(super) struct IdleSessions(Mutex<Kept>);

#[derive(Debug, Default)]
struct Kept {
    sessions: VecDeque<Session>,
    closed: bool,
}

impl IdleSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Session `id`: the one kept open, or opened from `store` (created first when `create`).
    pub fn open(&self, store: &Store, id: &SessionId, create: bool) -> Result<Session, StoreError> {
        let kept = {
            let mut idle = self.lock();
            let at = idle.sessions.iter().position(|s| s.id() == id);
            at.and_then(|at| idle.sessions.remove(at))
        };
        match kept {
            Some(session) => Ok(session),
            None if create => store.open_or_create(id),
            None => store.open(id),
        }
    }

    /// Closes every session kept open and keeps none from now on (at shutdown).
    pub fn close_all(&self) {
        let mut idle = self.lock();
        idle.closed = true;
        idle.sessions.clear();
    }

    /// Keeps `session` open for its next task, when it is in a clean state.
    pub fn keep(&self, session: Session) {
        if session.open_turn().is_some() || session.is_poisoned() {
            return;
        }
        let mut idle = self.lock();
        if idle.closed {
            return;
        }
        idle.sessions.push_back(session);
        while idle.sessions.len() > MAX_IDLE_SESSIONS {
            idle.sessions.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_kept_until_shutdown_and_none_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path()).unwrap();
        let id = SessionId::new("s").unwrap();
        let idle = IdleSessions::default();
        idle.keep(idle.open(&store, &id, true).unwrap());
        assert!(
            matches!(store.open(&id), Err(StoreError::Busy(_))),
            "kept open"
        );
        let session = idle.open(&store, &id, false).unwrap();
        idle.close_all();
        // A worker that finishes after shutdown began cannot keep its session.
        idle.keep(session);
        assert!(store.open(&id).is_ok(), "closed at shutdown");
    }

    #[test]
    fn a_session_with_a_turn_open_is_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path()).unwrap();
        let id = SessionId::new("open").unwrap();
        let idle = IdleSessions::default();
        let mut session = idle.open(&store, &id, true).unwrap();
        crate::turn::start_turn(&mut session, "a task").unwrap();
        idle.keep(session);
        // Opened from disk again, which ends the unfinished turn as interrupted.
        let reopened = idle.open(&store, &id, false).unwrap();
        assert_eq!(reopened.open_turn(), None);
        assert_eq!(reopened.records().len(), 3);
    }
}
