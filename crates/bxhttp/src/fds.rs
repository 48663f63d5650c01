//! How many connections past the cap one server may hold, so that the descriptors its
//! connections take never crowd out the daemon's own files: a session log created, the audit
//! log, an outgoing connection must still open when a flood holds every place.

use crate::MAX_OVERLOAD_ANSWERS;
use nix::sys::resource::{Resource, getrlimit};

/// Descriptors left to the daemon beyond its connections and their overload places: its
/// runtime, logs and state files, idle sessions' logs, outgoing connections.
pub const RESERVED_FDS: u64 = 32;

/// The places for connections past the cap under this process's open-file limit
/// ([`overload_places_within`]); [`MAX_OVERLOAD_ANSWERS`] when the limit cannot be read.
pub fn overload_places(max_connections: usize) -> usize {
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, _)) => overload_places_within(soft, max_connections),
        Err(_) => MAX_OVERLOAD_ANSWERS,
    }
}

/// The places for connections past the cap with `soft_limit` descriptors in all: what is left
/// after [`RESERVED_FDS`] and `max_connections`, at most [`MAX_OVERLOAD_ANSWERS`] and at least
/// one (a server at the cap still answers 503 rather than leave every client waiting).
pub fn overload_places_within(soft_limit: u64, max_connections: usize) -> usize {
    let room = soft_limit
        .saturating_sub(RESERVED_FDS)
        .saturating_sub(max_connections as u64);
    usize::try_from(room)
        .unwrap_or(usize::MAX)
        .clamp(1, MAX_OVERLOAD_ANSWERS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_low_open_file_limit_leaves_the_reserve_to_the_daemon() {
        // The slow-loris test's daemons: 96 descriptors, 16 connections.
        assert_eq!(overload_places_within(96, 16), 48);
        assert_eq!(overload_places_within(1024, 256), MAX_OVERLOAD_ANSWERS);
        assert_eq!(overload_places_within(40, 16), 1);
        assert_eq!(overload_places_within(u64::MAX, 1), MAX_OVERLOAD_ANSWERS);
    }
}
