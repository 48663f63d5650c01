//! The supervisor: start the children in order, each once the one before is ready (or with it,
//! `with_previous`); tell systemd; restart a child that dies, with backoff, until it dies too
//! often; stop them all in reverse order.

use crate::config::{Child, Config};
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
        let mut first = 0;
        while first < self.cfg.children.len() {
            let end = self.group_end(first);
            if !self.start_group(first..end).await? {
                return Ok(());
            }
            first = end;
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

    /// The end of the group of children that starts at `first`: it and those after it that
    /// start with the one before them (`with_previous`).
    fn group_end(&self, first: usize) -> usize {
        let children = &self.cfg.children;
        let mut end = first + 1;
        while end < children.len() && children[end].with_previous {
            end += 1;
        }
        end
    }

    /// Starts the children of `group` all at once, then waits until each is ready, each within
    /// its own `start_timeout_ms` from its start. `Ok(false)` when boxd was told to stop
    /// meanwhile. Whatever the outcome, the group's children are in `running`, where
    /// [`Supervisor::stop_all`] finds them.
    async fn start_group(&mut self, group: std::ops::Range<usize>) -> Result<bool, Error> {
        let mut deadlines = Vec::with_capacity(group.len());
        for i in group.clone() {
            let running = self.spawn(i)?;
            self.running[i] = Some(running);
            deadlines.push(tokio::time::Instant::now() + self.start_timeout(i));
        }
        for (i, deadline) in group.zip(deadlines) {
            let child = &self.cfg.children[i];
            let Some(running) = self.running[i].as_mut() else {
                continue;
            };
            if !wait_ready(child, running, deadline, self.stop.clone()).await? {
                return Ok(false);
            }
            self.metrics.ready(i);
            tracing::info!(child = %child.name, "ready");
        }
        Ok(true)
    }

    /// Checks the pinned hash, starts the `i`th child and waits until it is ready.
    async fn start(&mut self, i: usize) -> Result<Started, Error> {
        let mut running = self.spawn(i)?;
        let deadline = tokio::time::Instant::now() + self.start_timeout(i);
        let child = &self.cfg.children[i];
        match wait_ready(child, &mut running, deadline, self.stop.clone()).await {
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

    /// Checks the pinned hash of the `i`th child and starts it.
    fn spawn(&mut self, i: usize) -> Result<Running, Error> {
        let child = &self.cfg.children[i];
        pin::verify(child)?;
        self.generations[i] += 1;
        let running = process::spawn(
            child,
            i,
            self.generations[i],
            self.events.clone(),
            &self.metrics,
        )?;
        if let Some(start_ticks) = running.start_ticks() {
            self.runtime.add(&child.name, running.pid(), start_ticks);
        }
        Ok(running)
    }

    fn start_timeout(&self, i: usize) -> Duration {
        Duration::from_millis(self.cfg.children[i].start_timeout_ms)
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

/// Waits until `child`, started as `running`, is ready (`Ok(true)`), boxd is told to stop
/// (`Ok(false)`), or it exits or `deadline` passes first (an error naming it).
async fn wait_ready(
    child: &Child,
    running: &mut Running,
    deadline: tokio::time::Instant,
    mut stop: watch::Receiver<bool>,
) -> Result<bool, Error> {
    let mut last_check = String::from("no check finished");
    tokio::select! {
        r = tokio::time::timeout_at(deadline, ready::wait(&child.ready, running.pid(), &mut last_check)) => match r {
            Ok(()) => Ok(true),
            Err(_) => Err(Error::NotReady {
                name: child.name.clone(),
                timeout_ms: child.start_timeout_ms,
                last_check: last_check.clone(),
            }),
        },
        status = running.exited() => Err(Error::ExitedEarly { name: child.name.clone(), status }),
        _ = stop.wait_for(|s| *s) => Ok(false),
    }
}
