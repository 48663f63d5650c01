//! Who a server is, in the words of its errors: the daemon's name and the config keys its
//! socket and limits come from, so one implementation still tells each daemon's owner what to
//! change.

/// A daemon's name and where its socket's group and its limits are configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Names {
    /// The daemon, e.g. `loopd` ("is loopd already running?", "may not use loopd").
    pub daemon: &'static str,
    /// The key naming the group that may connect, e.g. `api.socket_group`.
    pub group_key: &'static str,
    /// The config section of `max_connections` and `max_body_bytes`, e.g. `api`.
    pub limits_section: &'static str,
}

impl Names {
    /// The names of `daemon`, whose socket's group is `group_key` and whose connection and body
    /// limits are in section `limits_section`.
    pub const fn new(
        daemon: &'static str,
        group_key: &'static str,
        limits_section: &'static str,
    ) -> Names {
        Names {
            daemon,
            group_key,
            limits_section,
        }
    }

    /// The key of the connection cap, e.g. `api.max_connections`.
    pub fn max_connections_key(&self) -> String {
        format!("{}.max_connections", self.limits_section)
    }

    /// The key of the request body limit, e.g. `api.max_body_bytes`.
    pub fn max_body_bytes_key(&self) -> String {
        format!("{}.max_body_bytes", self.limits_section)
    }
}

/// The names the unit tests word their errors with.
#[cfg(test)]
pub(crate) const TEST_NAMES: Names = Names::new("testd", "test.socket_group", "test");
