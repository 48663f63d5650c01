//! Which endpoint and main slot each session keeps to, so its prompt prefix stays cached
//! there: a bounded map, the least recently used session forgotten first.

use bxcore::SessionId;
use std::collections::HashMap;

/// The most sessions whose place is remembered; one forgotten starts afresh (least loaded).
pub const MAX_STICKY_SESSIONS: usize = 4096;

/// A place: an endpoint (by index) and a main slot on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Place {
    /// The endpoint's index in the router.
    pub member: usize,
    /// The main slot.
    pub slot: u32,
}

#[derive(Debug)]
struct Entry {
    place: Place,
    used: u64,
}

/// Sessions' places.
#[derive(Debug, Default)]
pub(super) struct Sticky {
    entries: HashMap<SessionId, Entry>,
    /// How many entries keep to each place: what routing compares, kept as entries change
    /// rather than counted under the lock.
    counts: HashMap<Place, usize>,
    /// When each place was last chosen for a turn, on `clock`: a session whose own slot is
    /// busy goes to the free one used least recently.
    chosen: HashMap<Place, u64>,
    clock: u64,
}

impl Sticky {
    /// Where `session` ran last, marking it used now.
    pub fn get(&mut self, session: &SessionId) -> Option<Place> {
        self.clock += 1;
        let clock = self.clock;
        self.entries.get_mut(session).map(|e| {
            e.used = clock;
            e.place
        })
    }

    /// Where `session` ran last, without marking it used.
    pub fn peek(&self, session: &SessionId) -> Option<Place> {
        self.entries.get(session).map(|e| e.place)
    }

    /// Remembers `session` at `place`, forgetting the least recently used session when full.
    pub fn set(&mut self, session: &SessionId, place: Place) {
        self.clock += 1;
        if !self.entries.contains_key(session)
            && self.entries.len() >= MAX_STICKY_SESSIONS
            && let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.used)
                .map(|(id, _)| id.clone())
        {
            self.forget(&oldest);
        }
        self.forget(session);
        *self.counts.entry(place).or_default() += 1;
        self.entries.insert(
            session.clone(),
            Entry {
                place,
                used: self.clock,
            },
        );
    }

    fn forget(&mut self, session: &SessionId) {
        if let Some(entry) = self.entries.remove(session)
            && let Some(count) = self.counts.get_mut(&entry.place)
        {
            *count = count.saturating_sub(1);
        }
    }

    /// Notes that a turn was routed to `place` now.
    pub fn used(&mut self, place: Place) {
        self.clock += 1;
        self.chosen.insert(place, self.clock);
    }

    /// When a turn was last routed to `place` (0: never).
    pub fn last_used(&self, place: Place) -> u64 {
        self.chosen.get(&place).copied().unwrap_or(0)
    }

    /// How many sessions keep to `place`.
    pub fn load(&self, place: Place) -> usize {
        self.counts.get(&place).copied().unwrap_or(0)
    }

    /// How many sessions keep to endpoint `member`.
    pub fn sessions_on(&self, member: usize) -> usize {
        self.counts
            .iter()
            .filter(|(place, _)| place.member == member)
            .map(|(_, count)| count)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn id(n: usize) -> SessionId {
        SessionId::new(&format!("s{n}")).unwrap()
    }

    #[test]
    fn the_least_recently_used_session_is_forgotten_when_full() {
        let mut sticky = Sticky::default();
        let place = Place { member: 0, slot: 0 };
        for n in 0..MAX_STICKY_SESSIONS {
            sticky.set(&id(n), place);
        }
        // Session 0 used again: session 1 is now the oldest.
        assert_eq!(sticky.get(&id(0)), Some(place));
        sticky.set(&id(MAX_STICKY_SESSIONS), Place { member: 1, slot: 0 });
        assert_eq!(sticky.get(&id(0)), Some(place));
        assert_eq!(sticky.get(&id(1)), None);
        assert_eq!(sticky.load(place), MAX_STICKY_SESSIONS - 1);
        assert_eq!(sticky.sessions_on(1), 1);
        // A session moved counts at its new place only.
        sticky.set(&id(0), Place { member: 1, slot: 0 });
        assert_eq!(sticky.load(place), MAX_STICKY_SESSIONS - 2);
        assert_eq!(sticky.sessions_on(1), 2);
    }
}
