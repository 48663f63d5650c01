//! MCP servers as tools: brokerd runs each `[[mcp]]` server as a child process over stdio
//! (JSON-RPC 2.0, the Model Context Protocol, through the `rmcp` client), lists its tools and
//! offers each as `<prefix>_<tool>`, a [`Tool`] like any built-in one.
//!
//! [`McpServers::start`] starts every configured server, does `initialize` and `tools/list`
//! (following pagination cursors) and fails with a clear [`McpError`] if one cannot. Then a
//! supervisor task per server watches the child: one that dies is restarted with bounded
//! exponential backoff ([`McpOptions`]) and its tools listed again; a call while it is down fails
//! with a message saying so. The servers' stderr goes to the log (target `brokerd::mcp::stderr`,
//! field `server`); their stdin and stdout are brokerd's pipes, never inherited. Each server runs
//! in its own process group, so a launcher (`npx`, a shell script) is stopped with everything it
//! started. [`McpServers::shutdown`] stops the children and reaps them.
//!
//! Tool names, descriptions and schemas come from the server: untrusted text. Names are checked
//! (`[A-Za-z0-9_-]`, at most [`MAX_TOOL_NAME_BYTES`] with the prefix) and descriptions capped.
//!
//! Secrets: a server's `env` values are templates, `{secret:NAME}` filled from the
//! [`SecretStore`] each time the server starts or restarts (a secret brokerd does not hold
//! stops that start with [`McpError::Env`]); a running server keeps the values it started
//! with, so a SIGHUP reload reaches it at its next start. Every stderr line is redacted before
//! it is logged or kept for an error message; so are the name a server gives itself, its tool
//! names and its log notifications before they are logged (`redact`). Every call's
//! arguments are scanned for every secret before they are sent (an MCP server can reach
//! outside): a match is denied `leak`.

mod child;
mod redact;
mod server;
mod tool;

use crate::config::McpServer;
use crate::secrets::SecretStore;
use crate::tool::Tool;
use server::{Server, ServerTask};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// How long a server may take to answer `initialize`, in milliseconds.
pub const INITIALIZE_TIMEOUT_MS: u64 = 30_000;
/// How long a server may take to list all its tools (every page), in milliseconds.
pub const LIST_TOOLS_TIMEOUT_MS: u64 = 10_000;
/// The wait before the first restart of a server that died, in milliseconds; it doubles with
/// each further failure in a row.
pub const RESTART_BACKOFF_INITIAL_MS: u64 = 250;
/// The longest wait between two restarts, in milliseconds.
pub const RESTART_BACKOFF_MAX_MS: u64 = 30_000;
/// How many failures in a row (deaths or failed starts) brokerd restarts a server through before
/// it gives up on it until brokerd itself restarts.
pub const MAX_RESTARTS_IN_ROW: u32 = 10;
/// How long a server must run, in milliseconds, for its failures in a row to count from zero.
pub const STABLE_UPTIME_MS: u64 = 60_000;
/// How long stopping one server may take (close its stdin, then `SIGTERM`, then `SIGKILL` to its
/// process group), in milliseconds.
pub const SHUTDOWN_TIMEOUT_MS: u64 = 10_000;
/// The most tools one server may offer; the rest are left out, with a warning.
pub const MAX_TOOLS_PER_SERVER: usize = 512;
/// The longest catalogue name, `<prefix>_<tool>`, in bytes (what model APIs accept).
pub const MAX_TOOL_NAME_BYTES: usize = 64;
/// The longest tool description kept, in bytes; longer ones are cut.
pub const MAX_DESCRIPTION_BYTES: usize = 2_048;
/// The longest line of a server's stderr that is logged, in bytes; the rest of it is dropped.
pub const STDERR_LINE_MAX_BYTES: usize = 4_096;
/// How much of a line of a server's stderr is read and redacted before it is cut to
/// [`STDERR_LINE_MAX_BYTES`], in bytes: a secret that straddles the cut is redacted whole
/// rather than left half there (for secrets whose forms are shorter than the difference).
pub const STDERR_LINE_SCAN_BYTES: usize = 2 * STDERR_LINE_MAX_BYTES;
/// How many of a server's last stderr lines an error message quotes.
pub const STDERR_TAIL_LINES: usize = 5;

/// The limits the MCP layer runs under; [`Default`] is the named constants above.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpOptions {
    /// How long `initialize` may take ([`INITIALIZE_TIMEOUT_MS`]).
    pub initialize_timeout: Duration,
    /// How long `tools/list` may take, all pages ([`LIST_TOOLS_TIMEOUT_MS`]).
    pub list_tools_timeout: Duration,
    /// The first restart's wait ([`RESTART_BACKOFF_INITIAL_MS`]).
    pub restart_backoff_initial: Duration,
    /// The longest restart wait ([`RESTART_BACKOFF_MAX_MS`]).
    pub restart_backoff_max: Duration,
    /// Failures in a row before giving up on a server ([`MAX_RESTARTS_IN_ROW`]).
    pub max_restarts_in_row: u32,
    /// The run time that clears the failure count ([`STABLE_UPTIME_MS`]).
    pub stable_uptime: Duration,
    /// How long stopping one server may take ([`SHUTDOWN_TIMEOUT_MS`]).
    pub shutdown_timeout: Duration,
}

impl Default for McpOptions {
    fn default() -> McpOptions {
        McpOptions {
            initialize_timeout: Duration::from_millis(INITIALIZE_TIMEOUT_MS),
            list_tools_timeout: Duration::from_millis(LIST_TOOLS_TIMEOUT_MS),
            restart_backoff_initial: Duration::from_millis(RESTART_BACKOFF_INITIAL_MS),
            restart_backoff_max: Duration::from_millis(RESTART_BACKOFF_MAX_MS),
            max_restarts_in_row: MAX_RESTARTS_IN_ROW,
            stable_uptime: Duration::from_millis(STABLE_UPTIME_MS),
            shutdown_timeout: Duration::from_millis(SHUTDOWN_TIMEOUT_MS),
        }
    }
}

/// Why an MCP server could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum McpError {
    /// The command could not be run at all (not found, not executable).
    #[error("mcp server {server:?}: cannot run {command:?}: {detail}")]
    Spawn {
        /// The server's configured name.
        server: String,
        /// The command that failed.
        command: String,
        /// What the OS said.
        detail: String,
    },
    /// The server ran but the `initialize` handshake failed (it exited, or answered wrongly).
    #[error("mcp server {server:?}: initialize failed: {detail}")]
    Initialize {
        /// The server's configured name.
        server: String,
        /// What went wrong, with the last lines of its stderr when it wrote any.
        detail: String,
    },
    /// `tools/list` failed.
    #[error("mcp server {server:?}: tools/list failed: {detail}")]
    ListTools {
        /// The server's configured name.
        server: String,
        /// What went wrong.
        detail: String,
    },
    /// A step took longer than its limit.
    #[error("mcp server {server:?}: {step} took longer than {limit_ms} ms")]
    Timeout {
        /// The server's configured name.
        server: String,
        /// The step: `initialize` or `tools/list`.
        step: &'static str,
        /// The limit, in milliseconds.
        limit_ms: u64,
    },
    /// An `env` value could not be filled: its `{secret:NAME}` names a secret brokerd does not
    /// hold (or the placeholder is malformed).
    #[error("mcp server {server:?}: env {variable}: {detail}")]
    Env {
        /// The server's configured name.
        server: String,
        /// The variable.
        variable: String,
        /// What is wrong, naming the secret (never a value).
        detail: String,
    },
    /// Two `[[mcp]]` entries share a name.
    #[error("mcp server name {0:?} is used twice")]
    DuplicateName(String),
}

/// Where one server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// Running and initialized: its tools can be called.
    Up,
    /// It died or failed to start; brokerd is starting it again.
    Restarting,
    /// It failed [`McpOptions::max_restarts_in_row`] times in a row; brokerd stopped trying.
    GaveUp,
    /// Shut down by [`McpServers::shutdown`].
    Stopped,
}

/// A snapshot of one server, for health checks, logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// Where it stands.
    pub state: ServerState,
    /// The process id of its child (the leader of its process group) while it is up.
    pub pid: Option<u32>,
    /// How many times it has started successfully (the first start counts).
    pub starts: u64,
    /// How many times brokerd started it again after it died or failed to start (each
    /// attempt counts, whether it came up or not).
    pub restarts: u64,
    /// How many tools it offers now.
    pub tools: usize,
    /// Why it last died or failed to start, if it did.
    pub last_error: Option<String>,
}

/// The running MCP servers of one brokerd.
#[derive(Debug)]
pub struct McpServers {
    servers: Vec<ServerTask>,
}

impl McpServers {
    /// Starts every server in `configs` with the default limits; see [`McpServers::start_with`].
    pub async fn start(
        configs: &[McpServer],
        secrets: &SecretStore,
    ) -> Result<McpServers, McpError> {
        McpServers::start_with(configs, secrets, McpOptions::default()).await
    }

    /// Starts every server in `configs` at once, its `env` filled from `secrets` (and again
    /// from their current values at each restart), waits until each has answered `initialize`
    /// and `tools/list`, then leaves a supervisor task per server to restart it when it dies.
    /// If any server fails to start, the ones that did are stopped again and the first failure
    /// (in config order) is returned. Must run inside a Tokio runtime.
    pub async fn start_with(
        configs: &[McpServer],
        secrets: &SecretStore,
        options: McpOptions,
    ) -> Result<McpServers, McpError> {
        let mut names = BTreeSet::new();
        for config in configs {
            if !names.insert(config.name.as_str()) {
                return Err(McpError::DuplicateName(config.name.clone()));
            }
        }
        let mut set = tokio::task::JoinSet::new();
        for (i, config) in configs.iter().enumerate() {
            let server = Arc::new(Server::new(config.clone(), options, secrets.clone()));
            set.spawn(async move {
                let result = server::connect(&server).await;
                (i, server, result)
            });
        }
        let mut started = Vec::with_capacity(configs.len());
        let mut failures = Vec::new();
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((i, server, Ok(conn))) => started.push((i, ServerTask::spawn(server, conn))),
                Ok((i, _, Err(error))) => failures.push((i, error)),
                Err(error) => failures.push((
                    usize::MAX,
                    McpError::Initialize {
                        server: String::from("?"),
                        detail: format!("start task failed: {error}"),
                    },
                )),
            }
        }
        started.sort_by_key(|(i, _)| *i);
        let servers = McpServers {
            servers: started.into_iter().map(|(_, task)| task).collect(),
        };
        failures.sort_by_key(|(i, _)| *i);
        if let Some((_, error)) = failures.into_iter().next() {
            tracing::error!(%error, "an MCP server failed to start; stopping the others");
            servers.shutdown().await;
            return Err(error);
        }
        Ok(servers)
    }

    /// The tools the servers offer now, as `(<prefix>_<tool>, tool)`, in config order. The list
    /// changes when a server restarts or announces `notifications/tools/list_changed`; call again
    /// for the current one. A name two servers would both give is kept for the first only.
    /// The caller must not let these shadow built-in tools.
    pub fn tools(&self) -> Vec<(String, Arc<dyn Tool>)> {
        let mut seen = BTreeSet::new();
        let mut tools = Vec::new();
        for task in &self.servers {
            for (name, tool) in task.server.tools() {
                if seen.insert(name.clone()) {
                    tools.push((name, tool));
                } else {
                    let tool = task.server.log_name(&name);
                    tracing::warn!(server = %task.server.name(), %tool,
                        "MCP tool name already offered by another server; left out");
                }
            }
        }
        tools
    }

    /// The names of the servers, in config order.
    pub fn names(&self) -> Vec<String> {
        self.servers
            .iter()
            .map(|t| t.server.name().to_owned())
            .collect()
    }

    /// Where the server called `name` stands; `None` if there is none.
    pub fn status(&self, name: &str) -> Option<ServerStatus> {
        self.find(name).map(|t| t.server.status())
    }

    /// Every server's name and where it stands, in config order.
    pub fn statuses(&self) -> Vec<(String, ServerStatus)> {
        self.servers
            .iter()
            .map(|t| (t.server.name().to_owned(), t.server.status()))
            .collect()
    }

    /// Waits, at most `timeout`, until the status of server `name` satisfies `condition`, and
    /// returns that status; `None` on timeout or if there is no such server.
    pub async fn wait_for_status(
        &self,
        name: &str,
        timeout: Duration,
        condition: impl FnMut(&ServerStatus) -> bool,
    ) -> Option<ServerStatus> {
        let task = self.find(name)?;
        tokio::time::timeout(timeout, task.server.wait_for(condition))
            .await
            .ok()
    }

    /// Stops every server: closes its stdin, then `SIGTERM`, then `SIGKILL` to its process group
    /// (each step bounded by [`McpOptions::shutdown_timeout`]), and reaps it. Calls made after
    /// this fail.
    pub async fn shutdown(self) {
        for task in &self.servers {
            task.signal_shutdown();
        }
        for task in self.servers {
            task.join().await;
        }
    }

    fn find(&self, name: &str) -> Option<&ServerTask> {
        self.servers.iter().find(|t| t.server.name() == name)
    }
}
