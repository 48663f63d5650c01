//! Who a server is, in the words of its errors: the daemon's name and the config keys its
//! limits come from, so one implementation still tells each daemon's owner what to change.

/// A daemon's name and the config keys its socket and limits come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Names {
    /// The daemon, e.g. `loopd` ("is loopd already running?", "may not use loopd").
    pub daemon: &'static str,
    /// The key naming the group that may connect, e.g. `api.socket_group`.
    pub group_key: &'static str,
    /// The key of the connection cap, e.g. `api.max_connections`.
    pub max_connections_key: &'static str,
    /// The key of the request body limit, e.g. `api.max_body_bytes`.
    pub max_body_bytes_key: &'static str,
}
