//! The supervisor: start the children in order, each once the one before is ready; tell
//! systemd; restart a child that dies, with backoff, until it dies too often; stop them all in
//! reverse order.

use crate::config::Config;
use crate::error::Error;
use crate::leftovers::RuntimeDir;
use crate::metrics::Metrics;
use crate::notify;
use crate::pin;
use crate::process::{self, Exited, Running};
use crate::ready;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};
use tokio_util::task::AbortOnDropHandle;

/// The most doublings of `restart.initial_backoff_ms` (past this the wait is capped anyway).
pub const MAX_BACKOFF_DOUBLINGS: u32 = 32;

/// What a start came to, when it did not fail.
enum Started {
    /// The child is ready.
    Ready(Running),
    /// boxd was told to stop meanwhile (the child has been stopped).
    Stopping,
}

/// Runs the children of `cfg` until `stop` turns true (then stops them and returns `Ok`) or
/// something fails (then stops them and returns the error), reporting them in `metrics`.
///
/// `runtime` is `runtime_dir`, taken ([`RuntimeDir::take`]: no other boxd holds it, and what
/// a boxd killed outright left running is gone) before anything starts.
pub async fn run(
    cfg: Config,
    runtime: RuntimeDir,
    stop: watch::Receiver<bool>,
    metrics: Arc<Metrics>,
) -> Result<(), Error> {
    let n = cfg.children.len();
    let (events, exits) = mpsc::unbounded_channel();
    let mut sup = Supervisor {
        cfg,
        runtime,
        stop,
        events,
        exits,
        running: (0..n).map(|_| None).collect(),
        generations: vec![0; n],
        restarts: vec![VecDeque::new(); n],
        metrics,
    };
    let result = sup.supervise().await;
    sup.stop_all().await;
    sup.runtime.clear();
    result
}

struct Supervisor {
    cfg: Config,
    runtime: RuntimeDir,
    stop: watch::Receiver<bool>,
    events: mpsc::UnboundedSender<Exited>,
    exits: mpsc::UnboundedReceiver<Exited>,
    running: Vec<Option<Running>>,
    generations: Vec<u64>,
    restarts: Vec<VecDeque<Instant>>,
    metrics: Arc<Metrics>,
}

impl Supervisor {
    async fn supervise(&mut self) -> Result<(), Error> {
        let _watchdog = self.watchdog();
        for i in 0..self.cfg.children.len() {
            match self.start(i).await? {
                Started::Ready(r) => self.running[i] = Some(r),
                Started::Stopping => return Ok(()),
            }
        }
        tracing::info!(children = self.cfg.children.len(), "all children are ready");
        self.tell_ready();
        loop {
            let mut stop = self.stop.clone();
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return Ok(()),
                Some(exit) = self.exits.recv() => {
                    let current = self.generations[exit.index] == exit.generation
                        && self.running[exit.index].is_some();
                    if current && !self.restart(exit).await? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Sends READY=1 (when `notify` is on and `NOTIFY_SOCKET` set).
    fn tell_ready(&self) {
        if !self.cfg.notify {
            return;
        }
        match notify::notify("READY=1") {
            Ok(true) => tracing::info!("told systemd READY=1"),
            Ok(false) => {}
            Err(e) => tracing::warn!("cannot tell systemd READY=1: {e}"),
        }
    }

    /// Starts the watchdog pings, from the start on (a child may take minutes to be ready),
    /// when `notify` is on and `WATCHDOG_USEC` set; they end when the returned guard drops.
    fn watchdog(&self) -> Option<AbortOnDropHandle<()>> {
        if !self.cfg.notify {
            return None;
        }
        let every = notify::watchdog_interval()?;
        tracing::info!(
            every_us = every.as_micros() as u64,
            "pinging systemd's watchdog"
        );
        Some(AbortOnDropHandle::new(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                if let Err(e) = notify::notify("WATCHDOG=1") {
                    tracing::warn!("cannot ping systemd's watchdog: {e}");
                }
            }
        })))
    }

    /// Checks the pinned hash, starts the `i`th child and waits until it is ready.
    async fn start(&mut self, i: usize) -> Result<Started, Error> {
        let child = &self.cfg.children[i];
        pin::verify(child)?;
        self.generations[i] += 1;
        let mut running = process::spawn(
            child,
            i,
            self.generations[i],
            self.events.clone(),
            &self.metrics,
        )?;
        if let Some(start_ticks) = running.start_ticks() {
            self.runtime.add(&child.name, running.pid(), start_ticks);
        }
        let timeout = Duration::from_millis(child.start_timeout_ms);
        let mut stop = self.stop.clone();
        let mut last_check = String::from("no check finished");
        let outcome = tokio::select! {
            r = tokio::time::timeout(timeout, ready::wait(&child.ready, running.pid(), &mut last_check)) => match r {
                Ok(()) => Ok(true),
                Err(_) => Err(Error::NotReady {
                    name: child.name.clone(),
                    timeout_ms: child.start_timeout_ms,
                    last_check: last_check.clone(),
                }),
            },
            status = running.exited() => Err(Error::ExitedEarly { name: child.name.clone(), status }),
            _ = stop.wait_for(|s| *s) => Ok(false),
        };
        match outcome {
            Ok(true) => {
                self.metrics.ready(i);
                tracing::info!(child = %child.name, "ready");
                Ok(Started::Ready(running))
            }
            Ok(false) => {
                running.stop().await;
                Ok(Started::Stopping)
            }
            Err(e) => {
                running.stop().await;
                Err(e)
            }
        }
    }

    /// Restarts the child that exited, after a backoff; `Ok(false)` when boxd was told to
    /// stop meanwhile. Fails when the child died too often or its config no longer matches.
    async fn restart(&mut self, exit: Exited) -> Result<bool, Error> {
        let i = exit.index;
        self.running[i] = None;
        let name = self.cfg.children[i].name.clone();
        tracing::warn!(child = %name, status = %exit.status, "exited");
        let r = self.cfg.restart.clone();
        loop {
            let now = Instant::now();
            let window = Duration::from_millis(r.window_ms);
            let times = &mut self.restarts[i];
            while times
                .front()
                .is_some_and(|t| now.duration_since(*t) > window)
            {
                times.pop_front();
            }
            if times.len() >= r.max_restarts as usize {
                return Err(Error::GaveUp {
                    name,
                    restarts: times.len(),
                    window_ms: r.window_ms,
                });
            }
            let doublings = u32::try_from(times.len())
                .unwrap_or(u32::MAX)
                .min(MAX_BACKOFF_DOUBLINGS);
            let backoff_ms = r
                .initial_backoff_ms
                .saturating_mul(1u64 << doublings)
                .min(r.max_backoff_ms);
            times.push_back(now);
            tracing::info!(child = %name, backoff_ms, restart = times.len(), "restarting after a backoff");
            let mut stop = self.stop.clone();
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(backoff_ms)) => {}
                _ = stop.wait_for(|s| *s) => return Ok(false),
            }
            self.metrics.restarting(i);
            match self.start(i).await {
                Ok(Started::Ready(running)) => {
                    self.running[i] = Some(running);
                    return Ok(true);
                }
                Ok(Started::Stopping) => return Ok(false),
                Err(e) if e.is_pin() => return Err(e),
                Err(e) => tracing::warn!("restart failed: {e}"),
            }
        }
    }

    /// Stops every running child, the last started first.
    async fn stop_all(&mut self) {
        for slot in self.running.iter_mut().rev() {
            if let Some(running) = slot.take() {
                running.stop().await;
            }
        }
    }
}
