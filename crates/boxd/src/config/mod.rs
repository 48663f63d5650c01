//! boxd's configuration: the TOML file (`config/boxd.toml`) and `BOXD_SECTION__KEY`
//! environment overrides, loaded with `bxconfig`.
//!
//! Every key has a default, so an empty file is a valid config (with no children).
//! `docs/config.md` lists every key with its unit and default.

mod child;

#[cfg(test)]
mod tests;

pub use child::{Child, DEFAULT_START_TIMEOUT_MS, DEFAULT_STOP_GRACE_MS, Ready};

use bxconfig::{LogConfig, Problem, Problems, Validate};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The prefix of boxd's environment overrides: `BOXD_RESTART__MAX_RESTARTS`.
pub const ENV_PREFIX: &str = "BOXD";

/// Default `runtime_dir`: the NixOS unit's `RuntimeDirectory`.
pub const DEFAULT_RUNTIME_DIR: &str = "/run/boxmaker";

/// boxd's whole configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Whether to tell systemd `READY=1` once every child is ready (and ping its watchdog when
    /// `WATCHDOG_USEC` is set). Only acts when `NOTIFY_SOCKET` is set.
    pub notify: bool,
    /// Where boxd keeps its lock (one boxd per directory) and its record of the children it
    /// started, so the next boxd kills what a boxd killed outright left running. Created when
    /// missing.
    pub runtime_dir: PathBuf,
    /// boxd's socket, where it answers `GET /metrics` (`docs/metrics.md`). None by default:
    /// boxd then has no socket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket: Option<PathBuf>,
    /// The group whose members may use `socket` (mode 0660). None: mode 0600, only boxd's own
    /// user and root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket_group: Option<String>,
    /// `[metrics]`: the optional TCP listener of `/metrics` (`docs/metrics.md`).
    pub metrics: bxmetrics::MetricsConfig,
    /// `[restart]`: what happens when a child dies.
    pub restart: Restart,
    /// `[log]`: the log level.
    pub log: LogConfig,
    /// `[[children]]`: the daemons to run, in start order.
    pub children: Vec<Child>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            notify: true,
            runtime_dir: PathBuf::from(DEFAULT_RUNTIME_DIR),
            socket: None,
            socket_group: None,
            metrics: bxmetrics::MetricsConfig::default(),
            restart: Restart::default(),
            log: LogConfig::default(),
            children: Vec::new(),
        }
    }
}

/// `[restart]`: a child that dies is restarted after a wait that doubles each time, up to a
/// bound; after `max_restarts` restarts within `window_ms`, boxd gives up and exits non-zero
/// (the systemd unit then fails).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Restart {
    /// The first wait before a restart, in milliseconds.
    pub initial_backoff_ms: u64,
    /// The longest wait before a restart, in milliseconds.
    pub max_backoff_ms: u64,
    /// How many restarts of one child are allowed within `window_ms`; one more and boxd gives
    /// up. 0: never restart.
    pub max_restarts: u32,
    /// The window the restarts are counted in, in milliseconds.
    pub window_ms: u64,
}

impl Default for Restart {
    fn default() -> Restart {
        Restart {
            initial_backoff_ms: 1_000,
            max_backoff_ms: 60_000,
            max_restarts: 5,
            window_ms: 600_000,
        }
    }
}

impl Validate for Config {
    fn validate(&self) -> Result<(), Vec<Problem>> {
        let mut p = Problems::new();
        p.path_non_empty("runtime_dir", &self.runtime_dir);
        if let Some(socket) = &self.socket {
            p.socket_path("socket", socket);
        }
        if let Some(group) = &self.socket_group {
            p.non_empty("socket_group", group);
            p.check(
                self.socket.is_some(),
                "socket_group",
                "is set but socket is not: boxd has no socket to give to the group",
            );
        }
        if let Err(e) = self.metrics.check() {
            p.push(e.key(), e.to_string());
        }
        let r = &self.restart;
        p.at_least("restart.initial_backoff_ms", r.initial_backoff_ms, 1);
        p.check(
            r.max_backoff_ms >= r.initial_backoff_ms,
            "restart.max_backoff_ms",
            format!(
                "must be at least restart.initial_backoff_ms ({}), is {}",
                r.initial_backoff_ms, r.max_backoff_ms
            ),
        );
        p.at_least("restart.window_ms", r.window_ms, 1);
        for (i, child) in self.children.iter().enumerate() {
            child.check(i, &mut p);
            if let Some(j) = self.children[..i].iter().position(|c| c.name == child.name) {
                p.push(
                    format!("children[{i}].name"),
                    format!(
                        "{:?} is already children[{j}].name: names must be unique",
                        child.name
                    ),
                );
            }
        }
        p.finish()
    }
}
