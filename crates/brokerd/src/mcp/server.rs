//! One MCP server: its shared state (what calls and the catalogue read) and the supervisor task
//! that restarts it when it dies.

use super::child::{self, Child, millis};
use super::redact::{self, Redactor};
use super::tool::{McpTool, ToolSpec};
use super::{McpError, McpOptions, ServerState, ServerStatus};
use crate::config::McpServer;
use crate::secrets::{SecretStore, template};
use crate::tool::{Tool, ToolError};
use rmcp::Peer;
use rmcp::service::RoleClient;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What calls see of a server at one moment.
#[derive(Clone)]
struct Snapshot {
    status: ServerStatus,
    peer: Option<Peer<RoleClient>>,
    tools: Arc<[ToolSpec]>,
    /// What redacts the words of the server running now (none before its first start).
    redactor: Option<Redactor>,
}

/// One configured server and where it stands.
pub(super) struct Server {
    config: McpServer,
    options: McpOptions,
    /// What its `env` placeholders are filled from at each start.
    secrets: SecretStore,
    state: watch::Sender<Snapshot>,
}

impl Server {
    /// A server not started yet, its `env` to be filled from `secrets`.
    pub(super) fn new(config: McpServer, options: McpOptions, secrets: SecretStore) -> Server {
        let snapshot = Snapshot {
            status: ServerStatus {
                state: ServerState::Restarting,
                pid: None,
                starts: 0,
                restarts: 0,
                tools: 0,
                last_error: None,
            },
            peer: None,
            tools: Arc::from(Vec::new()),
            redactor: None,
        };
        Server {
            config,
            options,
            secrets,
            state: watch::Sender::new(snapshot),
        }
    }

    /// Whether it is started with a secret in its `env`: its tools act as configured.
    pub(super) fn authenticated(&self) -> bool {
        self.config
            .env
            .values()
            .any(|value| template::mentions_secret(value))
    }

    /// The label of its tools' descriptions, as configured.
    pub(super) fn description_labels(&self) -> bxcore::Labels {
        self.config.description_labels()
    }

    /// Its configured name.
    pub(super) fn name(&self) -> &str {
        &self.config.name
    }

    /// `name`, which the server chose (a tool's name), as the log may show it: redacted with
    /// the secrets of its running child (or brokerd's now), cut, on one line.
    pub(super) fn log_name(&self, name: &str) -> String {
        let redactor = self.state.borrow().redactor.clone();
        let redactor =
            redactor.unwrap_or_else(|| Redactor::new(self.secrets.current(), self.secrets.clone()));
        redact::name(&redactor, name)
    }

    /// Its tools now, as `(<prefix>_<tool>, tool)`.
    pub(super) fn tools(self: &Arc<Self>) -> Vec<(String, Arc<dyn Tool>)> {
        let tools = self.state.borrow().tools.clone();
        tools
            .iter()
            .map(|spec| {
                let tool: Arc<dyn Tool> = Arc::new(McpTool::new(self.clone(), spec.clone()));
                (spec.schema.name.clone(), tool)
            })
            .collect()
    }

    /// Where it stands now.
    pub(super) fn status(&self) -> ServerStatus {
        self.state.borrow().status.clone()
    }

    /// Waits until its status satisfies `condition`.
    pub(super) async fn wait_for(
        &self,
        mut condition: impl FnMut(&ServerStatus) -> bool,
    ) -> ServerStatus {
        let mut rx = self.state.subscribe();
        match rx.wait_for(|s| condition(&s.status)).await {
            Ok(snapshot) => snapshot.status.clone(),
            // The sender lives in `self`, so this does not happen; answer what there is.
            Err(_) => self.status(),
        }
    }

    /// The connection to call it on, or why there is none.
    pub(super) fn peer(&self) -> Result<Peer<RoleClient>, ToolError> {
        let snapshot = self.state.borrow();
        if let Some(peer) = &snapshot.peer {
            return Ok(peer.clone());
        }
        let name = &self.config.name;
        let why = snapshot
            .status
            .last_error
            .as_deref()
            .unwrap_or("not started");
        Err(ToolError::Failed(match snapshot.status.state {
            ServerState::Up | ServerState::Restarting => {
                format!("MCP server {name:?} is restarting ({why}); try again shortly")
            }
            ServerState::GaveUp => format!(
                "MCP server {name:?} is down: it failed {} times in a row ({why})",
                self.options.max_restarts_in_row
            ),
            ServerState::Stopped => format!("MCP server {name:?} is shut down"),
        }))
    }

    fn set_up(&self, child: &Child, tools: Vec<ToolSpec>) {
        let peer = child.service.peer().clone();
        self.state.send_modify(|s| {
            s.status.state = ServerState::Up;
            s.status.pid = child.pid;
            s.status.starts += 1;
            s.status.tools = tools.len();
            s.peer = Some(peer);
            s.tools = Arc::from(tools);
            s.redactor = Some(child.redactor.clone());
        });
    }

    fn set_tools(&self, tools: Vec<ToolSpec>) {
        self.state.send_modify(|s| {
            s.status.tools = tools.len();
            s.tools = Arc::from(tools);
        });
    }

    fn count_restart(&self) {
        self.state
            .send_modify(|s| s.status.restarts = s.status.restarts.saturating_add(1));
    }

    fn set_down(&self, state: ServerState, error: Option<String>) {
        self.state.send_modify(|s| {
            s.status.state = state;
            s.status.pid = None;
            if error.is_some() {
                s.status.last_error = error;
            }
            s.peer = None;
        });
    }
}

/// A started server and its initial tool list.
pub(super) struct Conn {
    child: Child,
    tools: Vec<ToolSpec>,
}

/// Starts `server`'s child, initializes it and lists its tools.
pub(super) async fn connect(server: &Server) -> Result<Conn, McpError> {
    let mut child = child::spawn(&server.config, &server.options, &server.secrets).await?;
    let listed = list_tools(server, &child.service.peer().clone(), &child.redactor)
        .await
        .map_err(|error| redacted(error, &child.redactor));
    match listed {
        Ok(tools) => Ok(Conn { child, tools }),
        Err(error) => {
            let limit = server.options.shutdown_timeout;
            if tokio::time::timeout(limit, child.service.close())
                .await
                .is_err()
            {
                tracing::warn!(server = %server.name(), "MCP server did not stop in time");
            }
            Err(error)
        }
    }
}

/// `error` with the server's words in it redacted.
fn redacted(error: McpError, redactor: &Redactor) -> McpError {
    match error {
        McpError::ListTools { server, detail } => McpError::ListTools {
            server,
            detail: redactor.redact(&detail),
        },
        other => other,
    }
}

/// Lists every page of the server's tools (none if it offers no tools capability); what it
/// logs of the names it leaves out is redacted with `redactor`.
async fn list_tools(
    server: &Server,
    peer: &Peer<RoleClient>,
    redactor: &Redactor,
) -> Result<Vec<ToolSpec>, McpError> {
    let offers_tools = peer
        .peer_info()
        .is_none_or(|info| info.capabilities.tools.is_some());
    if !offers_tools {
        tracing::warn!(server = %server.name(), "MCP server offers no tools");
        return Ok(Vec::new());
    }
    let limit = server.options.list_tools_timeout;
    match tokio::time::timeout(limit, peer.list_all_tools()).await {
        Ok(Ok(tools)) => Ok(ToolSpec::from_listed(&server.config, tools, redactor)),
        Ok(Err(error)) => Err(McpError::ListTools {
            server: server.config.name.clone(),
            detail: error.to_string(),
        }),
        Err(_) => Err(McpError::Timeout {
            server: server.config.name.clone(),
            step: "tools/list",
            limit_ms: millis(limit),
        }),
    }
}

/// A server's supervisor task and the switch that stops it.
pub(super) struct ServerTask {
    pub(super) server: Arc<Server>,
    shutdown: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

impl std::fmt::Debug for ServerTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTask")
            .field("name", &self.server.name())
            .field("status", &self.server.status())
            .finish_non_exhaustive()
    }
}

impl ServerTask {
    /// Marks `server` up on `conn` and supervises it from now on.
    pub(super) fn spawn(server: Arc<Server>, conn: Conn) -> ServerTask {
        let (shutdown, rx) = watch::channel(false);
        server.set_up(&conn.child, conn.tools);
        let handle = tokio::spawn(supervise(server.clone(), conn.child, rx));
        ServerTask {
            server,
            shutdown,
            handle,
        }
    }

    /// Asks the supervisor to stop the server.
    pub(super) fn signal_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Waits until the supervisor has stopped the server.
    pub(super) async fn join(self) {
        self.signal_shutdown();
        if let Err(error) = self.handle.await {
            tracing::error!(server = %self.server.name(), %error, "MCP supervisor task failed");
        }
        self.server.set_down(ServerState::Stopped, None);
    }
}

/// Resolves once shutdown is asked for (or the switch is gone: [`super::McpServers`] dropped).
async fn shutdown_requested(rx: &mut watch::Receiver<bool>) {
    // An error means the sender is gone, which is a shutdown too.
    let _ = rx.wait_for(|stop| *stop).await;
}

/// How a running server's connection ended.
enum Exit {
    Shutdown,
    Died(String),
}

/// How an attempt to restart ended.
enum Restart {
    Up(Conn),
    Shutdown,
    GaveUp,
}

/// Watches `child` (already marked up) and restarts the server each time it dies.
async fn supervise(server: Arc<Server>, mut child: Child, mut shutdown: watch::Receiver<bool>) {
    let mut failures: u32 = 0;
    loop {
        let started = Instant::now();
        let error = match run(&server, child, &mut shutdown).await {
            Exit::Shutdown => break,
            Exit::Died(error) => error,
        };
        if started.elapsed() >= server.options.stable_uptime {
            failures = 0;
        }
        child = match restart(&server, &mut failures, error, &mut shutdown).await {
            Restart::Up(conn) => {
                server.set_up(&conn.child, conn.tools);
                conn.child
            }
            Restart::Shutdown => break,
            Restart::GaveUp => return,
        };
    }
    server.set_down(ServerState::Stopped, None);
    tracing::info!(server = %server.name(), "MCP server stopped");
}

/// Serves `child` until it dies or shutdown is asked for; lists its tools again when it says
/// they changed.
async fn run(server: &Server, child: Child, shutdown: &mut watch::Receiver<bool>) -> Exit {
    let Child {
        service,
        relist,
        stderr,
        tail,
        redactor,
        ..
    } = child;
    let cancel = service.cancellation_token();
    let peer = service.peer().clone();
    let waiting = service.waiting();
    tokio::pin!(waiting);
    loop {
        tokio::select! {
            quit = &mut waiting => {
                let quoted = Child::drain_stderr(stderr, &tail).await;
                let why = match quit {
                    Ok(_) => String::from("the server exited or closed its stdout"),
                    Err(error) => format!("its client task failed: {error}"),
                };
                return Exit::Died(redactor.redact(&format!("{why}{quoted}")));
            }
            () = shutdown_requested(shutdown) => {
                cancel.cancel();
                let limit = server.options.shutdown_timeout;
                if tokio::time::timeout(limit, &mut waiting).await.is_err() {
                    tracing::warn!(server = %server.name(), limit_ms = millis(limit),
                        "MCP server did not stop in time; it is killed in the background");
                }
                return Exit::Shutdown;
            }
            () = relist.notified() => match list_tools(server, &peer, &redactor).await {
                Ok(tools) => {
                    tracing::info!(server = %server.name(), tools = tools.len(),
                        "MCP server's tools changed");
                    server.set_tools(tools);
                }
                Err(error) => {
                    let error = redacted(error, &redactor);
                    tracing::warn!(%error, "listing changed MCP tools failed");
                }
            },
        }
    }
}

/// Restarts a server that died, with backoff, until it is up, shutdown is asked for, or it has
/// failed [`McpOptions::max_restarts_in_row`] times in a row.
async fn restart(
    server: &Server,
    failures: &mut u32,
    error: String,
    shutdown: &mut watch::Receiver<bool>,
) -> Restart {
    let name = server.name();
    let options = &server.options;
    let mut last_error = error;
    loop {
        *failures = failures.saturating_add(1);
        if *failures > options.max_restarts_in_row {
            tracing::error!(server = %name, failures = options.max_restarts_in_row,
                error = %last_error, "MCP server keeps failing; giving up on it");
            server.set_down(ServerState::GaveUp, Some(last_error));
            return Restart::GaveUp;
        }
        let delay = backoff(options, *failures);
        tracing::warn!(server = %name, attempt = *failures, delay_ms = millis(delay),
            error = %last_error, "MCP server is down; restarting it");
        server.set_down(ServerState::Restarting, Some(last_error.clone()));
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = shutdown_requested(shutdown) => return Restart::Shutdown,
        }
        server.count_restart();
        tokio::select! {
            attempt = connect(server) => match attempt {
                Ok(conn) => return Restart::Up(conn),
                Err(error) => last_error = error.to_string(),
            },
            () = shutdown_requested(shutdown) => return Restart::Shutdown,
        }
    }
}

/// The wait before restart attempt `failures` (1 for the first): doubling, capped.
fn backoff(options: &McpOptions, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(u32::BITS - 1);
    options
        .restart_backoff_initial
        .saturating_mul(1_u32 << doublings)
        .min(options.restart_backoff_max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let options = McpOptions::default();
        let ms = |n| millis(backoff(&options, n));
        assert_eq!(ms(1), super::super::RESTART_BACKOFF_INITIAL_MS);
        assert_eq!(ms(2), 2 * super::super::RESTART_BACKOFF_INITIAL_MS);
        assert_eq!(ms(40), super::super::RESTART_BACKOFF_MAX_MS);
        assert_eq!(ms(u32::MAX), super::super::RESTART_BACKOFF_MAX_MS);
    }
}
