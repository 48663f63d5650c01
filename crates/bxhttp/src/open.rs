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

/// The open connections by age (a counter, so the oldest comes first), and those closed but
/// not gone yet.
#[derive(Default)]
pub(crate) struct Open {
    next: u64,
    entries: BTreeMap<u64, Entry>,
    /// Tasks told to stop (evicted, or a replaced 503 answer) that still hold their socket:
    /// an aborted task drops it only when the runtime next gets to it.
    closing: Vec<AbortHandle>,
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
            self.abort(entry.task);
        }
        Some(rank)
    }

    /// Stops `task` and remembers it until it is gone.
    pub fn abort(&mut self, task: AbortHandle) {
        task.abort();
        self.closing.push(task);
    }

    /// Whether every task told to stop is gone, with its socket. Until then the accept loop
    /// does not accept, so a flood cannot outrun the closing and pile up descriptors.
    pub fn settled(&mut self) -> bool {
        self.closing.retain(|task| !task.is_finished());
        self.closing.is_empty()
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
    #![allow(clippy::unwrap_used, clippy::expect_used)]
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
        let ranked = [
            (0, Rank::Busy),
            (4, Rank::WaitsOnPeer),
            (1, Rank::WaitsOnPeer),
        ];
        assert_eq!(victim(ranked.into_iter()), Some((1, Rank::WaitsOnPeer)));
    }

    #[tokio::test]
    async fn a_closed_connection_is_settled_only_once_its_task_is_gone() {
        let mut tasks = tokio::task::JoinSet::new();
        let mut open = Open::default();
        let task = tasks.spawn(std::future::pending::<()>());
        open.add(Arc::new(Activity::new()), task);
        assert!(open.settled());
        assert_eq!(open.close_one(), Some(Rank::NoRequest));
        // Aborted, but the runtime has not dropped it (and its socket) yet.
        assert!(!open.settled());
        assert_eq!(open.count(), 0);
        assert!(tasks.join_next().await.unwrap().unwrap_err().is_cancelled());
        assert!(open.settled());
    }

    #[test]
    fn a_busy_connection_is_never_picked() {
        let ranked = [(0, Rank::Busy), (1, Rank::Busy)];
        assert_eq!(victim(ranked.into_iter()), None);
        assert_eq!(victim(std::iter::empty()), None);
    }
}
