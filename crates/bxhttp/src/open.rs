//! The open connections, oldest first, and which one to close to make room at the cap.

use crate::activity::{Activity, Rank};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::task::AbortHandle;

/// One open connection: what it is doing and its task, to close it.
struct Entry {
    activity: Arc<Activity>,
    task: AbortHandle,
}

/// The open connections by age (a counter, so the oldest comes first).
#[derive(Default)]
pub(crate) struct Open {
    next: u64,
    entries: BTreeMap<u64, Entry>,
}

impl Open {
    /// How many connections are open; forgets those whose task has ended.
    pub fn count(&mut self) -> usize {
        self.entries.retain(|_, entry| !entry.task.is_finished());
        self.entries.len()
    }

    /// Adds a connection, the newest.
    pub fn add(&mut self, activity: Arc<Activity>, task: AbortHandle) {
        self.entries.insert(self.next, Entry { activity, task });
        self.next += 1;
    }

    /// Closes the connection that [`victim`] picks and says how it ranked; None when every
    /// connection is busy.
    pub fn close_one(&mut self) -> Option<Rank> {
        let ranked = self
            .entries
            .iter()
            .map(|(age, entry)| (*age, entry.activity.rank()));
        let (age, rank) = victim(ranked)?;
        if let Some(entry) = self.entries.remove(&age) {
            entry.task.abort();
        }
        Some(rank)
    }
}

/// Of `(age, rank)` pairs, the one to close: the lowest rank, then the oldest; never a busy
/// one.
pub(crate) fn victim(ranked: impl Iterator<Item = (u64, Rank)>) -> Option<(u64, Rank)> {
    ranked
        .filter(|(_, rank)| *rank != Rank::Busy)
        .min_by_key(|(age, rank)| (*rank, *age))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_without_a_request_goes_first() {
        let ranked = [
            (0, Rank::Busy),
            (1, Rank::WaitsOnPeer),
            (2, Rank::NoRequest),
            (3, Rank::NoRequest),
        ];
        assert_eq!(victim(ranked.into_iter()), Some((2, Rank::NoRequest)));
    }

    #[test]
    fn then_the_oldest_waiting_on_its_peer() {
        let ranked = [(0, Rank::Busy), (4, Rank::WaitsOnPeer), (1, Rank::WaitsOnPeer)];
        assert_eq!(victim(ranked.into_iter()), Some((1, Rank::WaitsOnPeer)));
    }

    #[test]
    fn a_busy_connection_is_never_picked() {
        let ranked = [(0, Rank::Busy), (1, Rank::Busy)];
        assert_eq!(victim(ranked.into_iter()), None);
        assert_eq!(victim(std::iter::empty()), None);
    }
}
