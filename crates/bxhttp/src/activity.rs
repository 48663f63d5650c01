//! What one connection is doing, as the accept loop (which connection to close at the cap)
//! and the idle watch see it: its requests in flight, whether it waits on its peer, whether
//! the peer has sent anything yet, and when a byte last moved; and the accept loop's request
//! that it close, which the connection's own task carries out (see [`Activity::ask_to_close`]).

use crate::{FIRST_BYTE_GRACE_MS, SLOW_PEER_QUIET_MS};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How readily a connection is closed to make room at the cap; lower goes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// No request in flight: a head arriving slowly, idle keep-alive, or nothing sent for
    /// [`FIRST_BYTE_GRACE_MS`] since the connection was accepted.
    NoRequest,
    /// A request in flight that waits on the peer (its body, or the peer reading the answer)
    /// whose peer has moved no byte for [`SLOW_PEER_QUIET_MS`].
    WaitsOnPeer,
    /// Accepted less than [`FIRST_BYTE_GRACE_MS`] ago and nothing read from it yet: its
    /// request may be on its way, or waiting in the socket for its task to read it (in a
    /// burst), and closing the socket under it would reset the client. Never closed to make
    /// room.
    New,
    /// A request the server is working on or answering, or whose peer is sending or reading
    /// right now: never closed to make room.
    Busy,
}

impl Rank {
    /// Whether a connection of this rank may be closed to make room at the cap.
    pub fn may_close(self) -> bool {
        matches!(self, Rank::NoRequest | Rank::WaitsOnPeer)
    }
}

/// The shared state of one connection. The flags are hints read by other tasks, so relaxed
/// atomics are enough: a stale read only delays a decision by one look.
#[derive(Debug)]
pub(crate) struct Activity {
    /// The clock's zero for `stamp_ms`: when the connection was accepted.
    epoch: Instant,
    /// When a byte last moved, or the peer last started to owe bytes, in ms since `epoch`.
    stamp_ms: AtomicU64,
    /// Requests whose head has been read and whose answer has not been sent yet.
    in_flight: AtomicUsize,
    /// The handler waits for request body bytes the peer has not sent.
    awaiting_body: AtomicBool,
    /// The last write found the socket full: the peer is not reading.
    write_blocked: AtomicBool,
    /// A byte of the peer's has been read.
    heard: AtomicBool,
    /// A request head has been read (the connection has served, or serves, a request).
    started: AtomicBool,
    /// The accept loop asks the connection's task to close (to make room at the cap).
    close: Notify,
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
            heard: AtomicBool::new(false),
            started: AtomicBool::new(false),
            close: Notify::new(),
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

    /// Bytes of the peer's were read.
    pub fn heard(&self) {
        self.heard.store(true, Ordering::Relaxed);
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
            let grace = Duration::from_millis(FIRST_BYTE_GRACE_MS);
            if !self.heard.load(Ordering::Relaxed) && self.epoch.elapsed() < grace {
                Rank::New
            } else {
                Rank::NoRequest
            }
        } else if self.owes() && self.quiet_for() >= Duration::from_millis(SLOW_PEER_QUIET_MS) {
            Rank::WaitsOnPeer
        } else {
            Rank::Busy
        }
    }

    /// Whether a request head has been read on this connection.
    pub fn started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    /// Asks the connection's task to close, to make room at the cap. The task decides, by its
    /// own look at the connection: the accept loop's look may be stale by the time the task
    /// runs (a head read and dispatched since, an answer's last bytes still being written),
    /// and the task sees the connection between two of hyper's steps, never inside one.
    pub fn ask_to_close(&self) {
        self.close.notify_one();
    }

    /// Resolves once the accept loop asks the connection to close.
    pub async fn asked_to_close(&self) {
        self.close.notified().await;
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
        activity.started.store(true, Ordering::Relaxed);
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

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_is_kept_until_it_speaks_or_its_grace_ends() {
        let quiet = Activity::new();
        let spoke = Activity::new();
        assert_eq!((quiet.rank(), spoke.rank()), (Rank::New, Rank::New));
        assert!(!Rank::New.may_close());
        // A head arriving slowly: some bytes read, no request yet.
        spoke.heard();
        assert_eq!(spoke.rank(), Rank::NoRequest);
        tokio::time::advance(Duration::from_millis(FIRST_BYTE_GRACE_MS)).await;
        assert_eq!(quiet.rank(), Rank::NoRequest);
        assert!(Rank::NoRequest.may_close() && Rank::WaitsOnPeer.may_close());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_ranks_by_what_its_request_waits_on() {
        let quiet = Duration::from_millis(SLOW_PEER_QUIET_MS);
        let activity = Arc::new(Activity::new());
        activity.heard();
        assert_eq!(activity.rank(), Rank::NoRequest);
        assert!(!activity.started());
        let request = InFlight::start(Arc::clone(&activity));
        assert!(activity.started());
        assert_eq!(activity.rank(), Rank::Busy);
        // The peer is sending its body right now: busy, until it has been quiet a while.
        activity.set_awaiting_body(true);
        assert_eq!(activity.rank(), Rank::Busy);
        tokio::time::advance(quiet).await;
        assert_eq!(activity.rank(), Rank::WaitsOnPeer);
        activity.set_awaiting_body(false);
        activity.set_write_blocked(true);
        assert_eq!(activity.rank(), Rank::Busy);
        tokio::time::advance(quiet).await;
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
