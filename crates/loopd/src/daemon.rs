//! loopd's daemon mode: check the model server, open the store, serve the API until a
//! signal, then shut down in order: no new tasks (503), running turns told to stop and given
//! time to record their end (`interrupted`) and send their `ended` event, and only then the
//! event streams and the socket closed.

use crate::api::{ApiOptions, bind_socket, serve};
use crate::baseline::read_system_prompt;
use crate::blocking::Blocking;
use crate::broker::Broker;
use crate::config::Config;
use crate::engine::{Engine, EngineParts, ToolSource};
use crate::meter::{Meter, ScheduleRuns, system_clock};
use crate::schedule::{Paths, Scheduler, SystemClock};
use crate::session::{AppendTimes, Store};
use crate::tools::{FakeTools, Registry, ToolPort};
use anyhow::{Context, bail};
use std::sync::Arc;

mod recover;

/// Tokio worker threads for the API (turns run on their own threads).
pub const API_WORKER_THREADS: usize = 2;
/// How long running turns get to record their end at shutdown, in milliseconds. The API
/// keeps answering meanwhile (a new task gets 503); its event streams and socket close after.
pub const SHUTDOWN_GRACE_MS: u64 = 5_000;

pub use crate::tools::FAKE_TOOLS_NOTE;

/// Runs loopd with `cfg` until SIGTERM or SIGINT.
pub fn run(cfg: Config) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(API_WORKER_THREADS)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let system = read_system_prompt(&cfg.baseline.system)?;
    let blocking = Blocking::new(runtime.handle().clone());
    tracing::info!(endpoints = %cfg.llama.describe(), "waiting for llama-server");
    let routed = runtime.block_on(crate::route::start(&cfg))?;
    let kv = crate::kv::SlotFiles::open(&cfg.kv, &cfg.state_dir, routed.server()).with_context(
        || {
            format!(
                "kv.dir: cannot use {}",
                cfg.kv.dir_in(&cfg.state_dir).display()
            )
        },
    )?;
    if let Some(kv) = &kv {
        tracing::info!(dir = %kv.dir().display(), endpoints = ?cfg.kv.endpoints, "sessions' KV caches are kept in files between their turns");
    }
    let models = Arc::new(routed.with_kv(kv));
    let server = models.server().clone();
    // Only now is the slot size known: a configured result cap that would crowd it out is refused.
    if let Err(why) = cfg.r#loop.check_result_cap(server.n_ctx) {
        bail!("loop.tool_result_cap_bytes: {why}");
    }
    tracing::info!(
        n_ctx = server.n_ctx,
        slots = server.total_slots,
        model = %server.model,
        result_cap_bytes = cfg.r#loop.result_cap_bytes(server.n_ctx),
        "llama-server is ready"
    );
    // Before anything runs: a day of the accounts that cannot be read stops loopd here.
    let meter =
        Arc::new(Meter::load(&cfg, system_clock()).context("cannot load the usage accounts")?);
    let store = Store::new(&cfg.state_dir)
        .with_context(|| format!("cannot use the state dir {}", cfg.state_dir.display()))?
        .with_append_times(AppendTimes::into_histogram(
            meter.metrics().append_histogram(),
        ));
    store.remove_stale();
    // The session list comes from this index from now on; reading every log once happens
    // here, before the socket answers, not in a client's request.
    match store.summaries() {
        Ok(all) => tracing::info!(sessions = all.len(), "sessions indexed"),
        Err(e) => {
            tracing::warn!(error = %e, "cannot index the sessions now; the first listing tries again")
        }
    }
    // Before anything runs: what a stopped loopd left unfinished is ended, and the owner told
    // of the approvals it left behind (an approved call that may not have run).
    let ended = recover::end_unfinished_turns(&store, &cfg);
    if ended.turns > 0 {
        tracing::warn!(
            turns = ended.turns,
            approvals = ended.told,
            "ended the turns loopd left unfinished when it stopped"
        );
    }
    let (port, tools) = tool_port(&cfg, &blocking);
    let mut api_options = ApiOptions::from_config(&cfg.api)?;
    // The same connections tool calls go out on: the processes they reach are brokerd.
    if let ToolSource::Broker { broker, .. } = &tools {
        api_options.broker = Some(broker.connections().clone());
    }
    let web_config = cfg.web.clone();
    let socket = cfg.socket.clone();
    let specs = crate::schedule::specs(&cfg).map_err(|e| anyhow::anyhow!("schedules: {e}"))?;
    let schedule_paths = Paths::of(&cfg);
    let metrics_config = cfg.metrics.clone();
    let (cfg_expect, health_interval_ms) = (cfg.expect.clone(), cfg.llama.health_interval_ms);
    let engine = Engine::new(EngineParts {
        cfg,
        store,
        models: Arc::clone(&models),
        port,
        tools,
        system,
        blocking,
        meter: Arc::clone(&meter),
    });
    // Watched from now on: a turn goes only where the last look found the model up.
    let watching = tokio_util::sync::CancellationToken::new();
    runtime.spawn(Arc::clone(&models).watch(cfg_expect, health_interval_ms, watching.clone()));
    let _stop_watching = watching.drop_guard();
    runtime.block_on(async {
        // First: a port in use stops loopd before it serves anything or starts a schedule's
        // (catch-up) run, not with work in flight.
        let metrics_tcp = match metrics_config.listen {
            Some(addr) => Some(bind_metrics(addr).await?),
            None => None,
        };
        // Bound first, so that `listen` with port 0 (tests) gives the link its real port.
        let web_tcp = match web_config.listen {
            Some(addr) => Some(bind_web(addr).await?),
            None => None,
        };
        let console = match &web_tcp {
            Some(listener) => web_console(&web_config, listener)?,
            None => None,
        };
        api_options.web = console.as_ref().map(|c| Arc::clone(&c.sign_ins));
        // Listened for before the socket exists: a SIGTERM sent once it accepts (boxd counts
        // that as ready) is never lost in the moment the handler is being put in place.
        let signalled = signal();
        let listener = bind_socket(&socket, api_options.allowed_gid)
            .with_context(|| format!("cannot serve on {}", socket.display()))?;
        tracing::info!(socket = %socket.display(), "loopd is serving");
        let backend = Arc::new(engine.clone());
        // The heartbeat among them; the engine answers the schedule routes from it.
        let scheduler = Scheduler::start(
            backend.clone(),
            specs,
            schedule_paths,
            Arc::new(SystemClock),
            ScheduleRuns::into_meter(meter),
        )
        .context("cannot start the schedules")?;
        engine.set_scheduler(Arc::new(scheduler));
        let (metrics_stop, metrics_stopped) = tokio::sync::watch::channel(false);
        let metrics_listener = metrics_tcp.map(|listener| {
            let hosts = metrics_config.allowed_hosts.clone();
            serve_metrics(listener, &engine, hosts, metrics_stopped.clone())
        });
        let web_listener = web_tcp.zip(console).map(|(listener, console)| {
            tracing::info!(origin = %console.origin.as_url(), "serving the web console");
            tokio::spawn(crate::web::serve(
                listener,
                Arc::clone(&backend),
                console,
                metrics_stopped,
            ))
        });
        // The server stops when this resolves: only once the turns have ended, so that their
        // submitters get the `ended` event and the tasks still waiting get a 503, not a closed
        // connection.
        let stopping = async {
            signalled.await;
            // Before the engine: no run starts while the turns are told to stop.
            if let Some(scheduler) = engine.take_scheduler() {
                scheduler.stop().await;
            }
            tracing::info!("stopping: no new tasks; letting running turns record their end");
            engine.shutdown(SHUTDOWN_GRACE_MS).await;
        };
        serve(listener, backend, api_options, stopping).await;
        // Every slot's last session to its file, so that a restarted loopd finds it warm.
        if let Some(kv) = models.kv() {
            kv.save_all().await;
        }
        // The TCP listeners stop with the API: turns have ended and their events gone out.
        let _ = metrics_stop.send(true);
        if let Some(listener) = metrics_listener
            && let Err(e) = listener.await
        {
            tracing::warn!(error = %e, "the metrics listener's task failed");
        }
        if let Some(listener) = web_listener
            && let Err(e) = listener.await
        {
            tracing::warn!(error = %e, "the web console's task failed");
        }
        anyhow::Ok(())
    })
}

/// Binds `[metrics] listen` (checked as loopback, or allowed remote, by the config).
async fn bind_metrics(addr: std::net::SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    bxmetrics::listen::bind(addr)
        .await
        .with_context(|| format!("metrics.listen = \"{addr}\": cannot listen there"))
}

/// Binds `[web] listen` (checked as loopback, or allowed remote, by the config).
async fn bind_web(addr: std::net::SocketAddr) -> anyhow::Result<tokio::net::TcpListener> {
    crate::web::bind(addr)
        .await
        .with_context(|| format!("web.listen = \"{addr}\": cannot listen there"))
}

/// The console of `[web]`, on the address `listener` took.
fn web_console(
    web: &crate::config::Web,
    listener: &tokio::net::TcpListener,
) -> anyhow::Result<Option<Arc<crate::web::Console>>> {
    let listen = listener
        .local_addr()
        .context("web.listen: cannot read the bound address")?;
    let bound = crate::config::Web {
        listen: Some(listen),
        ..web.clone()
    };
    Ok(crate::web::Console::from_config(&bound).map(Arc::new))
}

/// Serves `GET /metrics` on `listener` from the engine, to requests for its address or
/// `allowed_hosts`, until `stop` turns true.
fn serve_metrics(
    listener: tokio::net::TcpListener,
    engine: &Engine,
    allowed_hosts: Vec<String>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "serving /metrics over TCP");
    }
    let source: Arc<dyn bxmetrics::Source> = Arc::new(engine.clone());
    tokio::spawn(bxmetrics::listen::serve_tcp(
        "loopd",
        listener,
        source,
        allowed_hosts,
        async move {
            let _ = stop.wait_for(|stop| *stop).await;
        },
    ))
}

/// The tool port and where registries come from: brokerd when `[broker] socket` is set,
/// else loopd's fake tools (and a warning saying so).
fn tool_port(cfg: &Config, blocking: &Blocking) -> (Arc<dyn ToolPort>, ToolSource) {
    match &cfg.broker.socket {
        Some(socket) => {
            let broker = Broker::new(socket.clone(), cfg.broker.call_timeout_ms, blocking.clone());
            // Started beside brokerd, loopd runs no turn and no schedule before brokerd
            // answers, unless brokerd is missing for long.
            match blocking.wait(broker.wait_up(crate::broker::START_WAIT_MS)) {
                Ok(health) => tracing::info!(
                    socket = %socket.display(),
                    exec = health.exec.as_deref().unwrap_or("not reported"),
                    "brokerd answers"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, wait_ms = crate::broker::START_WAIT_MS, "brokerd does not answer; tool calls fail until it does")
                }
            }
            let source = ToolSource::Broker {
                broker: broker.clone(),
                core_tools: cfg.broker.core_tools.clone(),
            };
            (Arc::new(broker), source)
        }
        None => {
            tracing::warn!("{FAKE_TOOLS_NOTE}");
            (
                Arc::new(FakeTools::new()),
                ToolSource::Fake(Registry::m2b()),
            )
        }
    }
}

/// A future that resolves at the first SIGTERM or SIGINT sent from this call on: the
/// listeners are in place when it returns, not when the future is first polled.
fn signal() -> impl Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let listening = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    );
    async move {
        let (Ok(mut term), Ok(mut int)) = listening else {
            tracing::error!("cannot listen for signals; stop loopd with SIGKILL");
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM"),
            _ = int.recv() => tracing::info!("SIGINT"),
        }
    }
}
