//! Per-turn call counts for `max_calls_per_turn`, in memory and bounded.
//!
//! Counts are kept per session for its latest turn only: a call from a newer turn starts the
//! session's counts afresh, and a call that names an older turn than the latest seen is counted
//! with the latest one (so going back to an old turn number never resets a limit). At most
//! [`MAX_TRACKED_SESSIONS`] sessions are tracked; past that, the session used least recently is
//! forgotten (its counts start again at zero).

use bxcore::SessionId;
use std::collections::HashMap;

/// The most sessions whose per-turn counts are kept at once (sessions, not bytes).
pub const MAX_TRACKED_SESSIONS: usize = 4_096;

/// One session's counts.
#[derive(Debug, Clone, Default)]
struct SessionCalls {
    /// The latest turn seen.
    turn: u64,
    /// Calls per tool in that turn.
    calls: HashMap<String, u32>,
    /// When the session was last counted, in [`CallCounters::tick`]s.
    used: u64,
}

/// Calls per (session, turn, tool).
#[derive(Debug, Clone)]
pub struct CallCounters {
    sessions: HashMap<SessionId, SessionCalls>,
    max_sessions: usize,
    /// A counter that orders uses, for forgetting the least recently used session.
    tick: u64,
}

impl Default for CallCounters {
    fn default() -> CallCounters {
        CallCounters::new()
    }
}

impl CallCounters {
    /// Counters that track up to [`MAX_TRACKED_SESSIONS`] sessions.
    pub fn new() -> CallCounters {
        CallCounters::with_max_sessions(MAX_TRACKED_SESSIONS)
    }

    /// Counters that track up to `max_sessions` sessions (at least one).
    pub fn with_max_sessions(max_sessions: usize) -> CallCounters {
        CallCounters {
            sessions: HashMap::new(),
            max_sessions: max_sessions.max(1),
            tick: 0,
        }
    }

    /// How many calls of `tool` were counted in `turn` of `session` (a turn older than the
    /// latest seen reads as the latest).
    pub fn count(&self, session: &SessionId, turn: u64, tool: &str) -> u32 {
        match self.sessions.get(session) {
            Some(s) if turn <= s.turn => s.calls.get(tool).copied().unwrap_or(0),
            _ => 0,
        }
    }

    /// Counts one call of `tool` in `turn` of `session`.
    pub fn record(&mut self, session: &SessionId, turn: u64, tool: &str) {
        self.tick += 1;
        let tick = self.tick;
        if !self.sessions.contains_key(session) && self.sessions.len() >= self.max_sessions {
            self.forget_least_recent();
        }
        let entry = self.sessions.entry(session.clone()).or_default();
        if turn > entry.turn {
            entry.turn = turn;
            entry.calls.clear();
        }
        entry.used = tick;
        *entry.calls.entry(tool.to_string()).or_insert(0) += 1;
    }

    /// How many sessions are tracked now.
    pub fn tracked_sessions(&self) -> usize {
        self.sessions.len()
    }

    fn forget_least_recent(&mut self) {
        let oldest = self
            .sessions
            .iter()
            .min_by_key(|(_, s)| s.used)
            .map(|(id, _)| id.clone());
        if let Some(id) = oldest {
            self.sessions.remove(&id);
        }
    }
}
