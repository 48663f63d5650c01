//! brokerd's configuration: the TOML file (`config/brokerd.toml`), `BROKERD_SECTION__KEY`
//! environment overrides, and the command-line flags, loaded with `bxconfig`.
//!
//! Every key has a default, so an empty file is a valid config; with no grants, every call is
//! denied. `docs/config.md` lists every key and the grant defaults.

mod approvals;
mod exec;
mod grant;
mod http_fetch;
mod mcp;
mod reach;
mod secrets;

#[cfg(test)]
mod tests;

pub use crate::secrets::SecretConfig;
pub use approvals::{ApprovalSettings, Approve};
pub use exec::{EXEC_TOOL, ExecGrant, RUNNERS, is_runner, program_glob};
pub use grant::{BUILTIN_TOOLS, Grant, GrantDefaults, HOST_TOOLS, PATH_TOOLS, WhenUntrusted};
pub use http_fetch::{
    DEFAULT_METHODS, HTTP_METHODS, HttpFetchSettings, HttpGrant, RESERVED_HEADERS,
};
pub use mcp::McpServer;
pub use reach::{DEFAULT_PORTS, HostEntry, parse_network};

use bxconfig::{LogConfig, Problem, Problems, Validate};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The prefix of brokerd's environment overrides: `BROKERD_LIMITS__CALL_TIMEOUT_MS`.
pub const ENV_PREFIX: &str = "BROKERD";

/// brokerd's whole configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// brokerd's socket (HTTP over a Unix socket). Overridden by `--socket PATH`.
    pub socket: PathBuf,
    /// The group whose members may use the socket (mode 0660; loopd's group). None: mode 0600,
    /// only brokerd's own user and root.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub socket_group: Option<String>,
    /// Where the audit log and the rest of brokerd's state live. Overridden by `--state-dir`.
    pub state_dir: PathBuf,
    /// `[limits]`: per-call limits.
    pub limits: Limits,
    /// `[log]`: the log level.
    pub log: LogConfig,
    /// `[[grants]]`: who may call what. None: every call is denied.
    pub grants: Vec<Grant>,
    /// `[[mcp]]`: external tool servers.
    pub mcp: Vec<McpServer>,
    /// `[http_fetch]`: settings of the `http_fetch` tool (a resolver override).
    pub http_fetch: HttpFetchSettings,
    /// `[approvals]`: how long an approval brokerd mints holds, and how many may be pending.
    pub approvals: ApprovalSettings,
    /// `[metrics]`: the optional TCP listener of `/metrics` (`docs/metrics.md`).
    pub metrics: bxmetrics::MetricsConfig,
    /// `[[secrets]]`: the credentials brokerd holds and grants attach (`docs/secrets.md`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<SecretConfig>,
    /// `[checkpoints]`: what writes changed, kept for undo (`docs/undo.md`).
    pub checkpoints: crate::checkpoints::CheckpointSettings,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            socket: PathBuf::from("/run/boxmaker/brokerd.sock"),
            socket_group: None,
            state_dir: PathBuf::from("/var/lib/boxmaker/brokerd"),
            limits: Limits::default(),
            log: LogConfig::default(),
            grants: Vec::new(),
            mcp: Vec::new(),
            http_fetch: HttpFetchSettings::default(),
            approvals: ApprovalSettings::default(),
            metrics: bxmetrics::MetricsConfig::default(),
            secrets: Vec::new(),
            checkpoints: crate::checkpoints::CheckpointSettings::default(),
        }
    }
}

/// `[limits]`: limits on every call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// The longest one tool call may run, in milliseconds; then it is killed and `Failed`.
    pub call_timeout_ms: u64,
    /// The most bytes of one tool result; the rest is cut and the result marked truncated.
    pub result_cap_bytes: usize,
    /// The largest request body brokerd accepts, in bytes.
    pub max_body_bytes: usize,
    /// The most connections open at once. At the cap the oldest connection without a request
    /// in flight is closed to make room; when every one has a request in flight, a new one
    /// gets 503.
    pub max_connections: usize,
    /// How long a client may take to send a request head, in milliseconds (also how long an
    /// idle keep-alive connection stays open).
    pub header_read_timeout_ms: u64,
    /// How long a connection whose client owes bytes (the rest of a request body, reading an
    /// answer) may move none, in milliseconds. A running tool call is not idle.
    pub idle_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            call_timeout_ms: 30_000,
            result_cap_bytes: 65_536,
            max_body_bytes: 1_048_576,
            max_connections: 128,
            header_read_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
        }
    }
}

impl Validate for Config {
    fn validate(&self) -> Result<(), Vec<Problem>> {
        let mut p = Problems::new();
        p.socket_path("socket", &self.socket);
        if let Some(group) = &self.socket_group {
            p.non_empty("socket_group", group);
        }
        p.path_non_empty("state_dir", &self.state_dir);
        p.at_least("limits.call_timeout_ms", self.limits.call_timeout_ms, 1);
        p.at_least("limits.result_cap_bytes", self.limits.result_cap_bytes, 1);
        p.at_least("limits.max_body_bytes", self.limits.max_body_bytes, 1);
        p.at_least("limits.max_connections", self.limits.max_connections, 1);
        p.at_least(
            "limits.header_read_timeout_ms",
            self.limits.header_read_timeout_ms,
            1,
        );
        p.at_least("limits.idle_timeout_ms", self.limits.idle_timeout_ms, 1);
        let prefixes: Vec<&str> = self.mcp.iter().map(|m| m.prefix.as_str()).collect();
        for (i, grant) in self.grants.iter().enumerate() {
            grant.check(i, &prefixes, &mut p);
        }
        exec::check_nesting(
            self.grants
                .iter()
                .enumerate()
                .filter(|(_, g)| g.tool == EXEC_TOOL)
                .map(|(i, g)| (i, &g.exec)),
            &mut p,
        );
        for (i, server) in self.mcp.iter().enumerate() {
            server.check(i, &mut p);
            if let Some(j) = self.mcp[..i].iter().position(|m| m.name == server.name) {
                p.push(
                    format!("mcp[{i}].name"),
                    format!("{:?} is already mcp[{j}].name", server.name),
                );
            }
            if let Some(j) = self.mcp[..i].iter().position(|m| m.prefix == server.prefix) {
                p.push(
                    format!("mcp[{i}].prefix"),
                    format!("{:?} is already mcp[{j}].prefix", server.prefix),
                );
            }
        }
        secrets::check(&self.secrets, &mut p);
        self.check_placeholders(&mut p);
        self.http_fetch.check(&mut p);
        self.approvals.check(&mut p);
        p.at_least("checkpoints.max_bytes", self.checkpoints.max_bytes, 1);
        p.at_least("checkpoints.keep_turns", self.checkpoints.keep_turns, 1);
        if let Err(e) = self.metrics.check() {
            p.push(e.key(), e.to_string());
        }
        p.finish()
    }

    /// A grant of `exec` where the sandbox cannot be made: brokerd would start, leave `exec`
    /// out and deny its calls, so `--check-config` says so (probing as the daemon does).
    fn warnings(&self) -> Vec<Problem> {
        let Some(i) = self.grants.iter().position(|g| g.tool == EXEC_TOOL) else {
            return Vec::new();
        };
        match exec::probe_blocking(&bxsandbox::ProbeOptions::from_env()) {
            Ok(()) => Vec::new(),
            Err(why) => vec![Problem::new(
                format!("grants[{i}].tool"),
                format!(
                    "exec is unavailable here ({why}): brokerd will leave it out of every \
                     catalogue and deny its calls"
                ),
            )],
        }
    }
}

impl Config {
    /// Every value that may hold `{secret:NAME}` (a grant's `headers` and `env`, an
    /// `[[mcp]]` server's `env`) parses and names a `[[secrets]]` entry.
    fn check_placeholders(&self, p: &mut Problems) {
        let known: Vec<&str> = self.secrets.iter().map(|s| s.name.as_str()).collect();
        for (i, grant) in self.grants.iter().enumerate() {
            for (name, value) in &grant.http.headers {
                secrets::check_template(&format!("grants[{i}].headers.{name}"), value, &known, p);
            }
            for (name, value) in &grant.exec.env {
                secrets::check_template(&format!("grants[{i}].env.{name}"), value, &known, p);
            }
        }
        for (i, server) in self.mcp.iter().enumerate() {
            for (name, value) in &server.env {
                secrets::check_template(&format!("mcp[{i}].env.{name}"), value, &known, p);
            }
            secrets::check_no_template(&format!("mcp[{i}].command"), &server.command, p);
            for (j, arg) in server.args.iter().enumerate() {
                secrets::check_no_template(&format!("mcp[{i}].args[{j}]"), arg, p);
            }
        }
        for (i, grant) in self.grants.iter().enumerate() {
            secrets::check_grant_keeps_secrets(i, grant, p);
        }
    }
}
