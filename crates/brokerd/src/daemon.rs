//! brokerd's daemon mode: read its secrets (`[[secrets]]`; one it cannot read stops it
//! before it serves), become the subreaper of its descendants (so none escapes the socket's
//! peer check by double-forking) and reap the orphans it adopts, open the audit log, start the
//! MCP servers, build the tool set, serve the socket (and `/metrics` on `[metrics] listen`,
//! when set) until SIGTERM or SIGINT, then stop the MCP servers and flush the audit log.
//! SIGHUP reads the secrets again.

use crate::audit::{AUDIT_SYNC_INTERVAL_MS, AuditLog};
use crate::broker::Broker;
use crate::builtin::exec::{NOT_PROBED, Sandbox};
use crate::checkpoints::Checkpoints;
use crate::config::Config;
use crate::mcp::McpServers;
use crate::policy::ApprovalTable;
use crate::reaper::{self, Reaper};
use crate::secrets::{CREDENTIALS_DIRECTORY, SecretConfig, SecretStore};
use crate::server::{ServerOptions, bind_socket, serve};
use crate::toolset::{ExecProbe, ToolSet, ToolSource};
use anyhow::Context;
use bxsandbox::ProbeOptions;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// Tokio worker threads (tool calls are short or wait on I/O; the file tools use tokio's
/// blocking pool).
pub const WORKER_THREADS: usize = 2;

/// The log line that says brokerd accepts calls (tests wait for it).
pub const SERVING: &str = "brokerd is serving";

/// The log line that says a SIGHUP's reload of the secrets is done (tests wait for it).
pub const SECRETS_RELOADED: &str = "secrets reloaded";

/// How long brokerd waits at exit for blocking tasks still running, in milliseconds. One can
/// outlive the MCP servers: after a server exits, its process group is waited for until every
/// member has exited, and brokerd, their subreaper, is the parent of those that outlive it.
pub const RUNTIME_SHUTDOWN_TIMEOUT_MS: u64 = 1_000;

/// Runs brokerd with `cfg` until SIGTERM or SIGINT.
pub fn run(cfg: Config) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(WORKER_THREADS)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let served = runtime.block_on(serve_until_signal(cfg));
    // Not a plain drop, which waits for every blocking task, however long it takes.
    runtime.shutdown_timeout(Duration::from_millis(RUNTIME_SHUTDOWN_TIMEOUT_MS));
    served
}

async fn serve_until_signal(cfg: Config) -> anyhow::Result<()> {
    // First: a SIGTERM from the moment the socket accepts (boxd's readiness) must never be
    // lost in the instant its handler is put in place (issue 36's cold-start bench lost one in
    // a few hundred starts when this came after the socket).
    let stop = shutdown_signal()?;
    let credentials = std::env::var_os(CREDENTIALS_DIRECTORY).map(PathBuf::from);
    let secrets = load_secrets(&cfg.secrets, credentials.as_deref())?;
    // From now on, not at the socket: a SIGHUP while the MCP servers start would kill brokerd.
    let _reloads = AbortOnDropHandle::new(tokio::spawn(reload_on_sighup(
        secrets.clone(),
        cfg.secrets.clone(),
        credentials,
    )?));
    // Before any MCP server starts: a descendant that double-forks before this would escape.
    reaper::become_subreaper().context(
        "cannot make brokerd the subreaper of its MCP servers (prctl PR_SET_CHILD_SUBREAPER)",
    )?;
    let _reaper = Reaper::start().context("cannot listen for SIGCHLD to reap orphans")?;
    let audit = Arc::new(AuditLog::open(&cfg.state_dir)?);
    // `secrets` is a handle on the one store: the MCP servers' `env` placeholders are filled
    // from it as they (re)start.
    let mcp = Arc::new(
        McpServers::start(&cfg.mcp, &secrets)
            .await
            .context("cannot start the MCP servers")?,
    );
    let served = serve_with(&cfg, &audit, &mcp, secrets, stop).await;
    stop_mcp(mcp).await;
    audit.sync()?;
    if served.is_ok() {
        tracing::info!("brokerd stopped");
    }
    served
}

/// Builds the broker over the built-ins and `mcp`, binds the metrics listener when
/// `[metrics] listen` is set, then the socket, and serves until `stop` resolves.
async fn serve_with(
    cfg: &Config,
    audit: &Arc<AuditLog>,
    mcp: &Arc<McpServers>,
    secrets: SecretStore,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let (tools, probe) = build_tools(cfg, mcp)?;
    // The pending approvals kept in the state dir: a restart while the owner decides keeps them.
    let approvals = ApprovalTable::kept_in(&cfg.approvals, &cfg.state_dir);
    // What writes changed, for undo: a store that cannot be opened stops brokerd, since every
    // write would otherwise be refused or unrecorded.
    let checkpoints = Checkpoints::open(&cfg.state_dir, cfg.checkpoints.clone())
        .context("cannot open the checkpoints of writes ([checkpoints])")?;
    let broker = Arc::new(
        Broker::new(cfg, tools, Arc::clone(audit))?
            .with_secrets(secrets)
            .with_approvals(approvals)
            .with_checkpoints(Arc::new(checkpoints)),
    );
    broker.metrics().watch_mcp(mcp);
    let options = ServerOptions::from_config(cfg)?;
    // The TCP port before the socket: a port in use then stops brokerd before it has made
    // a socket file it would leave behind.
    let metrics_listener = match cfg.metrics.listen {
        Some(addr) => Some(
            bxmetrics::listen::bind(addr)
                .await
                .with_context(|| format!("cannot serve metrics on {addr} (metrics.listen)"))?,
        ),
        None => None,
    };
    let listener = bind_socket(&cfg.socket, options.allowed_gid)
        .with_context(|| format!("cannot serve on {}", cfg.socket.display()))?;
    // Only now: the probe's trial sandboxes no longer hold back the socket (boxd's readiness).
    let _probing = probe.map(|probe| AbortOnDropHandle::new(tokio::spawn(probe_sandbox(probe))));
    // The address bound, which `listen` on port 0 leaves to the kernel: the log says it.
    let metrics_addr = metrics_listener
        .as_ref()
        .and_then(|listener| listener.local_addr().ok());
    let stopping = CancellationToken::new();
    let metrics_server = metrics_listener.map(|listener| {
        let source = Arc::clone(broker.metrics()) as Arc<dyn bxmetrics::Source>;
        let stopped = stopping.clone().cancelled_owned();
        tokio::spawn(bxmetrics::listen::serve_tcp(
            "brokerd",
            listener,
            source,
            cfg.metrics.allowed_hosts.clone(),
            stopped,
        ))
    });
    let syncer = tokio::spawn(sync_audit(Arc::clone(audit)));
    tracing::info!(
        socket = %cfg.socket.display(),
        audit = %audit.path().display(),
        tools = ?broker.tools().names(),
        grants = cfg.grants.len(),
        secrets = cfg.secrets.len(),
        metrics = ?metrics_addr,
        "{SERVING}"
    );
    let stopped = stopping.clone();
    serve(listener, broker, options, async move {
        stop.await;
        stopped.cancel();
    })
    .await;
    // Also when the server ended for another reason: the listener ends with it.
    stopping.cancel();
    if let Some(server) = metrics_server
        && let Err(e) = server.await
    {
        tracing::error!("the metrics listener failed: {e}");
    }
    syncer.abort();
    Ok(())
}

/// The tools this brokerd offers: the built-ins (as `cfg` sets them up), `exec` when a grant
/// names it and the sandbox probe finds its walls (the probe is returned, to run once the
/// socket is bound: [`probe_sandbox`]), and each `[[mcp]]` server's tools (as
/// `<prefix>_<tool>`), which follow the servers as they restart.
fn build_tools(
    cfg: &Config,
    mcp: &Arc<McpServers>,
) -> anyhow::Result<(ToolSet, Option<Arc<ExecProbe>>)> {
    let (mut tools, probe) = if Sandbox::needed_by(&cfg.grants) {
        let probe = Arc::new(ExecProbe::running(&cfg.grants));
        let tools = ToolSet::with_builtins_and_probe(cfg, Arc::clone(&probe))?;
        (tools, Some(probe))
    } else {
        tracing::debug!("exec's sandbox is {NOT_PROBED}");
        let unprobed = Sandbox::Unavailable(NOT_PROBED.to_owned());
        (ToolSet::with_builtins_and_sandbox(cfg, unprobed)?, None)
    };
    tools.add_source(Arc::clone(mcp) as Arc<dyn ToolSource>);
    Ok((tools, probe))
}

/// Probes the sandbox (after the socket is bound: brokerd answers meanwhile, its health says
/// `exec: probing`, and a catalogue or call that needs `exec` waits) and settles `probe`.
async fn probe_sandbox(probe: Arc<ExecProbe>) {
    let sandbox = Sandbox::probe(&ProbeOptions::from_env()).await;
    match sandbox.unavailable() {
        None => tracing::info!(walls = %sandbox.describe(), "exec's sandbox is ready"),
        Some(why) => tracing::warn!(
            "exec is unavailable, left out of every catalogue and its calls denied: {why}"
        ),
    }
    probe.settle(sandbox);
}

/// Reads every secret `configs` names (`credentials`: `$CREDENTIALS_DIRECTORY`). Any that
/// cannot be read stops brokerd: the error lists each, by name and file, never a value.
fn load_secrets(
    configs: &[SecretConfig],
    credentials: Option<&std::path::Path>,
) -> anyhow::Result<SecretStore> {
    SecretStore::load(configs, credentials).map_err(|errors| {
        let each: Vec<String> = errors.iter().map(ToString::to_string).collect();
        anyhow::anyhow!(
            "cannot read {} of the {} secrets ([[secrets]]), so brokerd does not start: {}",
            errors.len(),
            configs.len(),
            each.join("; ")
        )
    })
}

/// A future that reads the secrets again at each SIGHUP (the handler is in place when this
/// returns, so SIGHUP no longer stops brokerd): a secret it cannot read keeps its old value,
/// and its error is logged (names and files only).
fn reload_on_sighup(
    store: SecretStore,
    configs: Vec<SecretConfig>,
    credentials: Option<PathBuf>,
) -> anyhow::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
    Ok(async move {
        while hup.recv().await.is_some() {
            let store = store.clone();
            let configs = configs.clone();
            let credentials = credentials.clone();
            // Reading files: off the async workers.
            let reload = tokio::task::spawn_blocking(move || {
                let errors = store.reload(&configs, credentials.as_deref());
                (errors, store.current().names().count())
            });
            match reload.await {
                Ok((errors, held)) => {
                    for e in &errors {
                        tracing::error!("SIGHUP: {e}; it keeps the value it had");
                    }
                    tracing::info!(secrets = held, failed = errors.len(), "{SECRETS_RELOADED}");
                }
                Err(e) => tracing::error!("SIGHUP: the reload of the secrets failed: {e}"),
            }
        }
    })
}

/// Stops the MCP servers once nothing else holds them.
async fn stop_mcp(mcp: Arc<McpServers>) {
    match Arc::try_unwrap(mcp) {
        Ok(servers) => servers.shutdown().await,
        Err(_) => tracing::warn!(
            "MCP servers are still in use at exit (a call outlived the drain); \
             they stop when brokerd exits and their stdin closes"
        ),
    }
}

/// Flushes the audit log to disk every [`AUDIT_SYNC_INTERVAL_MS`] when lines were written.
async fn sync_audit(audit: Arc<AuditLog>) {
    let mut every = tokio::time::interval(Duration::from_millis(AUDIT_SYNC_INTERVAL_MS));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let audit = Arc::clone(&audit);
        match tokio::task::spawn_blocking(move || audit.sync()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!("{e}"),
            Err(e) => tracing::error!("the audit sync task failed: {e}"),
        }
    }
}

/// A future that resolves at the first SIGTERM or SIGINT; the handlers are in place when
/// this returns, so a signal sent once brokerd says it serves is never missed.
fn shutdown_signal() -> anyhow::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = int.recv() => tracing::info!("SIGINT"),
        }
    })
}
