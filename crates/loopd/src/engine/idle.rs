//! Sessions kept open between tasks: a session's next task starts from the open, verified
//! `Session` its last one left, instead of reading and verifying its whole log again. At most
//! [`MAX_IDLE_SESSIONS`] are kept, holding at most [`MAX_IDLE_SESSION_BYTES`] between them
//! (`Session::held_bytes`: each holds its records in memory, and its log's lock); the least
//! recently used goes first, so a burst of long sessions does not leave loopd holding all of
//! them. Only a session in a clean state is kept: no turn open, no failed write; any other is
//! dropped, and its next task opens it from disk, which recovers it.

use crate::session::{Session, Store, StoreError};
use bxcore::SessionId;
use std::collections::VecDeque;
use std::sync::Mutex;

/// The most sessions kept open with no task running on them.
pub const MAX_IDLE_SESSIONS: usize = 64;
/// The most bytes the sessions kept open may hold between them (`Session::held_bytes`); a
/// session larger than this alone is not kept.
pub const MAX_IDLE_SESSION_BYTES: u64 = 8 << 20;

/// The sessions kept open, least recently used first; none once closed (at shutdown).
#[derive(Debug)]
pub(super) struct IdleSessions {
    kept: Mutex<Kept>,
    max_sessions: usize,
    max_bytes: u64,
}

impl Default for IdleSessions {
    fn default() -> IdleSessions {
        IdleSessions::with_limits(MAX_IDLE_SESSIONS, MAX_IDLE_SESSION_BYTES)
    }
}

#[derive(Debug, Default)]
struct Kept {
    /// Each with its `held_bytes` when it was kept.
    sessions: VecDeque<(Session, u64)>,
    /// The sum of those.
    bytes: u64,
    closed: bool,
}

impl IdleSessions {
    /// Keeping at most `max_sessions`, holding at most `max_bytes` between them.
    fn with_limits(max_sessions: usize, max_bytes: u64) -> IdleSessions {
        IdleSessions {
            kept: Mutex::default(),
            max_sessions,
            max_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Session `id`: the one kept open, or opened from `store` (created first when `create`).
    pub fn open(&self, store: &Store, id: &SessionId, create: bool) -> Result<Session, StoreError> {
        let kept = {
            let mut idle = self.lock();
            let at = idle.sessions.iter().position(|(s, _)| s.id() == id);
            let kept = at.and_then(|at| idle.sessions.remove(at));
            if let Some((_, bytes)) = &kept {
                idle.bytes -= bytes;
            }
            kept
        };
        match kept {
            Some((session, _)) => Ok(session),
            None if create => store.open_or_create(id),
            None => store.open(id),
        }
    }

    /// Closes every session kept open and keeps none from now on (at shutdown).
    pub fn close_all(&self) {
        let mut idle = self.lock();
        idle.closed = true;
        idle.sessions.clear();
        idle.bytes = 0;
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
        let bytes = session.held_bytes();
        idle.sessions.push_back((session, bytes));
        idle.bytes += bytes;
        while idle.sessions.len() > self.max_sessions || idle.bytes > self.max_bytes {
            match idle.sessions.pop_front() {
                Some((_, bytes)) => idle.bytes -= bytes,
                None => break,
            }
        }
    }

    /// How many sessions are kept open, and the bytes they hold.
    #[cfg(test)]
    fn held(&self) -> (usize, u64) {
        let idle = self.lock();
        (idle.sessions.len(), idle.bytes)
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
        let mut made = idle.open(&store, &id, true).unwrap();
        made.append(bxcore::LogRecord::Note {
            time: bxcore::Timestamp::now(),
            text: "made".into(),
        })
        .unwrap();
        idle.keep(made);
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

    /// Session `name`, made in `store` with a turn of `text` (its log grows by about that).
    fn session_of(idle: &IdleSessions, store: &Store, name: &str, text: &str) -> Session {
        let id = SessionId::new(name).unwrap();
        let mut session = idle.open(store, &id, true).unwrap();
        crate::turn::start_turn(&mut session, text).unwrap();
        let turn = session.open_turn().unwrap();
        session
            .append(bxcore::LogRecord::TurnEnd {
                turn,
                end: bxcore::TurnEnd::Done,
                time: bxcore::Timestamp::now(),
            })
            .unwrap();
        session
    }

    #[test]
    fn the_sessions_kept_hold_at_most_the_byte_limit_and_the_least_recently_used_go() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path()).unwrap();
        let big = "x".repeat(10_000);
        let idle = IdleSessions::with_limits(MAX_IDLE_SESSIONS, 25_000);
        for name in ["a", "b", "c"] {
            let session = session_of(&idle, &store, name, &big);
            assert!(session.held_bytes() > 10_000);
            idle.keep(session);
        }
        // Three of over 10 000 bytes are more than 25 000: the first kept went.
        let (count, bytes) = idle.held();
        assert_eq!(count, 2);
        assert!(bytes <= 25_000, "{bytes}");
        assert!(
            store.open(&SessionId::new("a").unwrap()).is_ok(),
            "a was closed"
        );
        assert!(matches!(
            store.open(&SessionId::new("b").unwrap()),
            Err(StoreError::Busy(_))
        ));
        // Taking one out gives its bytes back; one larger than the whole limit is not kept.
        let b = idle
            .open(&store, &SessionId::new("b").unwrap(), false)
            .unwrap();
        assert_eq!(idle.held().0, 1);
        drop(b);
        idle.keep(session_of(&idle, &store, "huge", &"y".repeat(30_000)));
        assert_eq!(
            idle.held().0,
            0,
            "a session over the whole limit alone was kept"
        );
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
