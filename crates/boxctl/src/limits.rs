//! How long boxctl waits for loopd, so that a loopd that hangs never hangs boxctl (issue 33.6):
//! a connect timeout, a response timeout, and the silence a stream may keep.
//!
//! - Connecting (and the HTTP handshake) must finish within `connect_ms`.
//! - A request's answer must come within `response_ms`: the whole answer for most requests,
//!   the answer's head for an event stream. A request loopd answers only once a turn starts
//!   (`task`, `compact`, `schedule run`: a busy session queues them, legitimately for a long
//!   time) may wait on past that, as long as loopd answers a status request within
//!   `response_ms` each time the wait passes another `response_ms`.
//! - An event stream must bring a byte at least every `stream_idle_ms`: loopd pings an idle
//!   stream every [`SSE_PING_INTERVAL_MS`], so silence for three pings means loopd is stuck.
//!
//! Each limit has a flag and an environment variable (`cli`); giving up exits 8
//! (`cli::EXIT_TIMEOUT`).

use proto::api::SSE_PING_INTERVAL_MS;
use std::path::Path;

/// The longest connecting to loopd's socket may take, in milliseconds.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// The longest loopd may take to answer a request (see the module's doc), in milliseconds.
pub const RESPONSE_TIMEOUT_MS: u64 = 30_000;
/// How many of loopd's ping periods an event stream may stay silent.
pub const SILENT_PINGS: u64 = 3;
/// The longest an event stream may bring nothing, not even a ping, in milliseconds.
pub const STREAM_IDLE_TIMEOUT_MS: u64 = SILENT_PINGS * SSE_PING_INTERVAL_MS;

/// The limits of one boxctl run, in milliseconds (each at least 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Connecting and the handshake.
    pub connect_ms: u64,
    /// A request's answer (its head, for a stream).
    pub response_ms: u64,
    /// An event stream's silence.
    pub stream_idle_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            connect_ms: CONNECT_TIMEOUT_MS,
            response_ms: RESPONSE_TIMEOUT_MS,
            stream_idle_ms: STREAM_IDLE_TIMEOUT_MS,
        }
    }
}

/// What boxctl waited for when it gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waited {
    /// The connection.
    Connect,
    /// A request's answer.
    Answer,
    /// A status request's answer, asked while a task (or compaction, or a schedule's run)
    /// waited for its turn.
    Alive,
    /// The next byte of an event stream.
    Stream,
}

/// The one line that says boxctl gave up on loopd at `socket` after `limit_ms`.
pub fn gave_up(socket: &Path, waited: Waited, limit_ms: u64) -> String {
    let at = socket.display();
    match waited {
        Waited::Connect => format!(
            "loopd at {at} took no connection within {limit_ms} ms (--connect-timeout-ms); \
             is it stuck?"
        ),
        Waited::Answer => format!(
            "loopd at {at} sent no answer within {limit_ms} ms (--response-timeout-ms); \
             is it stuck?"
        ),
        Waited::Alive => format!(
            "loopd at {at} sent no answer within {limit_ms} ms (--response-timeout-ms), not \
             even to a status request while the request waited for its turn; is it stuck?"
        ),
        Waited::Stream => format!(
            "loopd at {at} went silent: nothing on the event stream for {limit_ms} ms, not even \
             its pings (--stream-idle-timeout-ms); the turn may go on in loopd"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_may_stay_silent_for_three_of_loopds_pings() {
        assert_eq!(STREAM_IDLE_TIMEOUT_MS, 3 * SSE_PING_INTERVAL_MS);
        assert!(Timeouts::default().stream_idle_ms > SSE_PING_INTERVAL_MS);
    }
}
