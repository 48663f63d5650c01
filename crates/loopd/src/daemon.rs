//! loopd's daemon mode: check the model server, open the store, serve the API until a
//! signal, then let running turns end as `interrupted`.

use crate::api::{ApiOptions, bind_socket, serve};
use crate::baseline::read_system_prompt;
use crate::config::Config;
use crate::engine::{Engine, EngineParts};
use crate::llama::{Client, ClientOptions, check_expectations};
use crate::session::Store;
use crate::tools::{FakeTools, Registry, ToolPort};
use anyhow::{Context, bail};
use proto::api::BrokerStatus;
use std::sync::Arc;

/// Tokio worker threads for the API (turns run on their own threads).
pub const API_WORKER_THREADS: usize = 2;
/// How long running turns get to record their end at shutdown, in milliseconds.
pub const SHUTDOWN_GRACE_MS: u64 = 5_000;

/// What loopd says when it answers tools itself.
const FAKE_TOOLS_NOTE: &str = "no broker configured: tools are answered by loopd's built-in \
     fake tools (clock, echo) until brokerd arrives (issue #5)";

/// Runs loopd with `cfg` until SIGTERM or SIGINT.
pub fn run(cfg: Config) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(API_WORKER_THREADS)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let system = read_system_prompt(&cfg.baseline.system)?;
    let options = ClientOptions::from_config(&cfg.llama).context("llama settings")?;
    let client = Arc::new(Client::new(options, runtime.handle().clone()));
    tracing::info!(url = %cfg.llama.url, "waiting for llama-server");
    let server = client
        .wait_until_ready(cfg.llama.health_wait_ms)
        .with_context(|| format!("llama-server at {} is not ready", cfg.llama.url))?;
    if let Err(problems) = check_expectations(&cfg.expect, &cfg.slots, &server) {
        bail!(
            "llama-server at {} does not match the config: {}",
            cfg.llama.url,
            problems.join("; ")
        );
    }
    tracing::info!(n_ctx = server.n_ctx, slots = server.total_slots, model = %server.model, "llama-server is ready");
    let store = Store::new(&cfg.state_dir)
        .with_context(|| format!("cannot use the state dir {}", cfg.state_dir.display()))?;
    let (port, broker) = tool_port(&cfg)?;
    let api_options = ApiOptions::from_config(&cfg.api)?;
    let socket = cfg.socket.clone();
    let engine = Engine::new(EngineParts {
        cfg,
        store,
        client,
        port,
        registry: Registry::m2b(),
        system,
        server,
        broker,
        handle: runtime.handle().clone(),
    });
    runtime.block_on(async {
        let listener = bind_socket(&socket, api_options.allowed_gid)
            .with_context(|| format!("cannot serve on {}", socket.display()))?;
        tracing::info!(socket = %socket.display(), "loopd is serving");
        serve(listener, Arc::new(engine.clone()), api_options, signal()).await;
        tracing::info!("stopping: letting running turns record their end");
        engine.shutdown(SHUTDOWN_GRACE_MS).await;
        anyhow::Ok(())
    })
}

/// The tool port: brokerd when configured (issue #5), else the fake tools.
fn tool_port(cfg: &Config) -> anyhow::Result<(Arc<dyn ToolPort>, BrokerStatus)> {
    if let Some(socket) = &cfg.broker.socket {
        bail!(
            "broker.socket is set ({}), but this loopd cannot talk to brokerd yet (issue #5): \
             leave broker.socket unset to use the built-in fake tools",
            socket.display()
        );
    }
    tracing::warn!("{FAKE_TOOLS_NOTE}");
    let status = BrokerStatus {
        kind: "fake".to_string(),
        socket: None,
        ok: true,
        note: FAKE_TOOLS_NOTE.to_string(),
    };
    Ok((Arc::new(FakeTools::new()), status))
}

/// Resolves at the first SIGTERM or SIGINT.
async fn signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::error!("cannot listen for signals; stop loopd with SIGKILL");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = int.recv() => tracing::info!("SIGINT"),
    }
}
