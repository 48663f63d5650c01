//! What one connection is doing, as the accept loop (which connection to close at the cap)
//! and the idle watch see it: its requests in flight, whether it waits on its peer, and when a
//! byte last moved.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How readily a connection is closed to make room at the cap; lower goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// No request in flight: no head yet, a head arriving slowly, or idle keep-alive.
    NoRequest,
    /// A request in flight that waits on the peer: its body, or the peer reading the answer.
    WaitsOnPeer,
    /// A request the server is working on or answering: never closed to make room.
    Busy,
}

/// The shared state of one connection. The flags are hints read by other tasks, so relaxed
/// atomics are enough: a stale read only delays a decision by one look.
#[derive(Debug)]
pub(crate) struct Activity {
    /// The clock's zero for `stamp_ms`.
    epoch: Instant,
    /// When a byte last moved, or the peer last started to owe bytes, in ms since `epoch`.
    stamp_ms: AtomicU64,
    /// Requests whose head has been read and whose answer has not been sent yet.
    in_flight: AtomicUsize,
    /// The handler waits for request body bytes the peer has not sent.
    awaiting_body: AtomicBool,
    /// The last write found the socket full: the peer is not reading.
    write_blocked: AtomicBool,
}

impl Activity {
    /// A new connection's state: nothing in flight, nothing owed, just stamped.
    pub fn new() -> Activity {
        Activity {
            epoch: Instant::now(),
            stamp_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            awaiting_body: AtomicBool::new(false),
            write_blocked: AtomicBool::new(false),
        }
    }

    fn stamp(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.stamp_ms.store(ms, Ordering::Relaxed);
    }

    /// Bytes moved in either direction.
    pub fn moved(&self) {
        self.stamp();
    }

    /// The handler now waits (or no longer waits) for body bytes from the peer. The idle
    /// clock starts when the wait does, not at the last byte before it.
    pub fn set_awaiting_body(&self, waiting: bool) {
        if !self.awaiting_body.swap(waiting, Ordering::Relaxed) && waiting {
            self.stamp();
        }
    }

    /// A write found the socket full (or no longer does).
    pub fn set_write_blocked(&self, blocked: bool) {
        if !self.write_blocked.swap(blocked, Ordering::Relaxed) && blocked {
            self.stamp();
        }
    }

    /// Whether the peer owes bytes: the rest of a request body, or reading an answer.
    pub fn owes(&self) -> bool {
        self.awaiting_body.load(Ordering::Relaxed) || self.write_blocked.load(Ordering::Relaxed)
    }

    /// How long since a byte last moved (or the peer started to owe bytes).
    pub fn quiet_for(&self) -> Duration {
        let now = self.epoch.elapsed();
        now.saturating_sub(Duration::from_millis(self.stamp_ms.load(Ordering::Relaxed)))
    }

    /// How readily this connection is closed to make room.
    pub fn rank(&self) -> Rank {
        if self.in_flight.load(Ordering::Relaxed) == 0 {
            Rank::NoRequest
        } else if self.owes() {
            Rank::WaitsOnPeer
        } else {
            Rank::Busy
        }
    }
}

/// One request in flight on a connection, from its head until its answer's body is dropped
/// (sent, or the connection gone).
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Activity>);

impl InFlight {
    /// Counts a request in on `activity`.
    pub fn start(activity: Arc<Activity>) -> InFlight {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(activity)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        // A request that ends while its body or answer was owed owes nothing any more.
        self.0.awaiting_body.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_ranks_by_what_its_request_waits_on() {
        let activity = Arc::new(Activity::new());
        assert_eq!(activity.rank(), Rank::NoRequest);
        let request = InFlight::start(Arc::clone(&activity));
        assert_eq!(activity.rank(), Rank::Busy);
        activity.set_awaiting_body(true);
        assert_eq!(activity.rank(), Rank::WaitsOnPeer);
        activity.set_awaiting_body(false);
        activity.set_write_blocked(true);
        assert_eq!(activity.rank(), Rank::WaitsOnPeer);
        activity.set_write_blocked(false);
        assert_eq!(activity.rank(), Rank::Busy);
        drop(request);
        assert_eq!(activity.rank(), Rank::NoRequest);
    }

    #[test]
    fn the_peer_owes_bytes_while_a_body_or_a_write_waits_on_it() {
        let activity = Activity::new();
        assert!(!activity.owes());
        activity.set_awaiting_body(true);
        assert!(activity.owes());
        activity.set_awaiting_body(false);
        activity.set_write_blocked(true);
        assert!(activity.owes());
        activity.set_write_blocked(false);
        assert!(!activity.owes());
    }

    #[tokio::test(start_paused = true)]
    async fn the_idle_clock_restarts_when_bytes_move_or_the_peer_starts_to_owe() {
        let activity = Activity::new();
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(activity.quiet_for(), Duration::from_millis(500));
        activity.set_awaiting_body(true);
        assert_eq!(activity.quiet_for(), Duration::ZERO);
        tokio::time::advance(Duration::from_millis(300)).await;
        // Still waiting: the clock is not restarted by the same wait.
        activity.set_awaiting_body(true);
        assert_eq!(activity.quiet_for(), Duration::from_millis(300));
        activity.moved();
        assert_eq!(activity.quiet_for(), Duration::ZERO);
    }
}
