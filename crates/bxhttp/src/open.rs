//! The open connections, oldest first, which one to close to make room at the cap, and those
//! asked to close that are not gone yet.

use crate::activity::{Activity, Rank};
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::task::AbortHandle;

/// One open connection: what it is doing and its task.
struct Entry {
    activity: Arc<Activity>,
    task: AbortHandle,
}

/// The open connections by age (a counter, so the oldest comes first), and those asked to
/// close but not gone yet.
#[derive(Default)]
pub(crate) struct Open {
    next: u64,
    entries: BTreeMap<u64, Entry>,
    /// Connections asked to close (to make room) whose task still holds its socket, by age.
    closing: BTreeMap<u64, Entry>,
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

    /// Asks the connection that [`victim`] picks to close and says how it ranked; None when
    /// none may be closed (every connection is busy or new).
    pub fn close_one(&mut self) -> Option<Rank> {
        let ranked = self
            .entries
            .iter()
            .map(|(age, entry)| (*age, entry.activity.rank()));
        let (age, rank) = victim(ranked)?;
        if let Some(entry) = self.entries.remove(&age) {
            entry.activity.ask_to_close();
            self.closing.insert(age, entry);
        }
        Some(rank)
    }

    /// Whether every connection asked to close is gone, with its socket. Until then the
    /// accept loop does not accept, so a flood cannot outrun the closing and pile up
    /// descriptors. A connection that turned busy before its task could close it (a request
    /// read since the loop looked) is open again and counted again; one whose peer stalls the
    /// close (it does not read the end of its answer) is cut.
    pub fn settled(&mut self) -> bool {
        let closing = std::mem::take(&mut self.closing);
        for (age, entry) in closing {
            if entry.task.is_finished() {
                continue;
            }
            match entry.activity.rank() {
                Rank::Busy | Rank::New => {
                    self.entries.insert(age, entry);
                }
                Rank::WaitsOnPeer => {
                    entry.task.abort();
                    self.closing.insert(age, entry);
                }
                Rank::NoRequest => {
                    self.closing.insert(age, entry);
                }
            }
        }
        self.closing.is_empty()
    }
}

/// Of `(age, rank)` pairs, the one to close: the lowest rank, then the oldest; never a busy
/// or a new one ([`Rank::may_close`]).
pub(crate) fn victim(ranked: impl Iterator<Item = (u64, Rank)>) -> Option<(u64, Rank)> {
    ranked
        .filter(|(_, rank)| rank.may_close())
        .min_by_key(|(age, rank)| (*rank, *age))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::activity::InFlight;

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
    async fn a_connection_asked_to_close_is_settled_only_once_its_task_is_gone() {
        let mut tasks = tokio::task::JoinSet::new();
        let mut open = Open::default();
        let activity = Arc::new(Activity::new());
        activity.heard();
        let asked = Arc::clone(&activity);
        // The connection's task: it closes (ends) once asked.
        let task = tasks.spawn(async move { asked.asked_to_close().await });
        open.add(activity, task);
        assert!(open.settled());
        assert_eq!(open.close_one(), Some(Rank::NoRequest));
        assert_eq!(open.count(), 0);
        tasks.join_next().await.unwrap().unwrap();
        assert!(open.settled());
        assert_eq!(open.count(), 0);
    }

    #[tokio::test]
    async fn a_connection_that_turned_busy_before_closing_is_counted_again() {
        let mut tasks = tokio::task::JoinSet::new();
        let mut open = Open::default();
        let activity = Arc::new(Activity::new());
        activity.heard();
        open.add(
            Arc::clone(&activity),
            tasks.spawn(std::future::pending::<()>()),
        );
        assert_eq!(open.close_one(), Some(Rank::NoRequest));
        assert!(!open.settled());
        // Its task read a request before it saw the ask: it serves it, and counts again.
        let _request = InFlight::start(Arc::clone(&activity));
        assert!(open.settled());
        assert_eq!(open.count(), 1);
    }

    #[test]
    fn a_busy_or_new_connection_is_never_picked() {
        let ranked = [(0, Rank::Busy), (1, Rank::New)];
        assert_eq!(victim(ranked.into_iter()), None);
        assert_eq!(victim(std::iter::empty()), None);
    }
}
