//! boxd's daemon mode: take the runtime dir, serve `/metrics` on boxd's socket (`socket`) and
//! on `[metrics] listen` when they are set, and run the supervisor until SIGTERM or SIGINT.

use crate::config::Config;
use crate::leftovers::RuntimeDir;
use crate::metrics::Metrics;
use crate::server;
use anyhow::Context;
use std::sync::Arc;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// What boxd logs on SIGHUP, which it ignores (tests wait for it).
pub const SIGHUP_IGNORED: &str = "SIGHUP: boxd has nothing to reload and keeps running; to \
     reload brokerd's secrets, send SIGHUP to brokerd (docs/secrets.md)";

/// Runs the children of `cfg` until SIGTERM or SIGINT (then `Ok`) or until something fails.
pub fn run(cfg: Config) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
        // SIGHUP would end boxd (its default), and with it the appliance: `systemctl kill
        // --signal=HUP` reaches every process of the unit, and an operator who means to reload
        // brokerd's secrets may send it to boxd. boxd has nothing to reload: it says so.
        let mut hup = signal(SignalKind::hangup()).context("cannot watch SIGHUP")?;
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                tracing::warn!("{SIGHUP_IGNORED}");
            }
        });
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            tracing::info!("{name}: stopping the children in reverse order");
            let _ = tx.send(true);
        });
        // Before anything is bound or started: fails when another boxd holds it.
        let dir = RuntimeDir::take(&cfg.runtime_dir).await?;
        let names = cfg.children.iter().map(|c| c.name.clone()).collect();
        let metrics = Arc::new(Metrics::new(names));
        let stopping = CancellationToken::new();
        let servers = serve_metrics(&cfg, &metrics, &stopping).await?;
        let supervised = crate::supervisor::run(cfg, dir, rx, metrics).await;
        stopping.cancel();
        for served in servers {
            if let Err(e) = served.await {
                tracing::error!("a metrics server failed: {e}");
            }
        }
        supervised?;
        anyhow::Ok(())
    })
}

/// Binds boxd's socket and the metrics listener, those that are configured (both before
/// either serves, so a failure leaves nothing behind), and serves `metrics` on them until
/// `stopping` is cancelled.
async fn serve_metrics(
    cfg: &Config,
    metrics: &Arc<Metrics>,
    stopping: &CancellationToken,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let tcp = match cfg.metrics.listen {
        Some(addr) => Some(
            bxmetrics::listen::bind(addr)
                .await
                .with_context(|| format!("cannot serve metrics on {addr} (metrics.listen)"))?,
        ),
        None => None,
    };
    let mut servers = Vec::new();
    if let Some(path) = &cfg.socket {
        let (listener, peers) = server::bind(path, cfg.socket_group.as_deref())
            .with_context(|| format!("cannot serve on {} (socket)", path.display()))?;
        let stopped = stopping.clone().cancelled_owned();
        servers.push(tokio::spawn(server::serve(
            listener,
            Arc::clone(metrics),
            peers,
            stopped,
        )));
        tracing::info!(socket = %path.display(), "serving /metrics on boxd's socket");
    }
    if let Some(listener) = tcp {
        // Port 0 leaves the port to the kernel: the log says which it is.
        let bound = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let source = Arc::clone(metrics) as Arc<dyn bxmetrics::Source>;
        let stopped = stopping.clone().cancelled_owned();
        servers.push(tokio::spawn(bxmetrics::listen::serve_tcp(
            "boxd",
            listener,
            source,
            cfg.metrics.allowed_hosts.clone(),
            stopped,
        )));
        tracing::info!(metrics = %bound, "serving /metrics over TCP");
    }
    Ok(servers)
}
