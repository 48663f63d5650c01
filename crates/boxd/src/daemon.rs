//! boxd's daemon mode: run the supervisor until SIGTERM or SIGINT.

use crate::config::Config;
use anyhow::Context;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// Runs the children of `cfg` until SIGTERM or SIGINT (then `Ok`) or until something fails.
pub fn run(cfg: Config) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
        let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
        let (tx, rx) = watch::channel(false);
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            tracing::info!("{name}: stopping the children in reverse order");
            let _ = tx.send(true);
        });
        crate::supervisor::run(cfg, rx).await?;
        anyhow::Ok(())
    })
}
