//! The pool of turn workers: threads that take lanes with work from one bounded ready queue.
//! However many sessions submit at once, loopd runs [`turn_workers`] turn threads *at work*:
//! one per main slot of every endpoint, so that as many turns are in flight as the model
//! servers serve at once (issue 36: a GPU server's 32 or 64 slots), and
//! [`SPARE_TURN_WORKERS`] more. A lane waits in the queue (not on a thread of its own) until a
//! worker is free. A worker runs its lane's work to the end of the lane's queue (one writer per
//! log), then takes the next lane.
//!
//! A turn that waits for brokerd (a tool call) or for the owner (a call's approval) gives its
//! main slot back and is *parked*: it does not count among the workers at work. When lanes wait
//! and no worker at work is free, another thread is started in its place, so waiting turns
//! never stop other sessions; a worker beyond the number ends when it would take its next lane.
//! At most [`MAX_PARKED_WORKERS`] threads are started so; past it a parked turn keeps its
//! worker, as all did before.
//!
//! The workers hold the engine weakly while idle, so an engine that every handle dropped is
//! freed, and its workers, told so by the queue, end.

use super::Inner;
use super::lane::Work;
use crate::config::Config;
use crate::runtime::Stop;
use bxcore::SessionId;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};

/// Turn worker threads beside one per main slot: for sessions waiting for a main slot, and the
/// background slot's work after turns (summaries, compaction), which holds a worker while it
/// waits for that slot. With the default single main slot the pool has 8 at work.
pub const SPARE_TURN_WORKERS: usize = 7;

/// The most threads started beyond [`turn_workers`] in the places of parked turns.
pub const MAX_PARKED_WORKERS: usize = 64;

/// The turn workers for `cfg`: one per main slot of all its endpoints, and
/// [`SPARE_TURN_WORKERS`].
pub fn turn_workers(cfg: &Config) -> usize {
    let main: usize = crate::config::plans(&cfg.llama, &cfg.slots)
        .iter()
        .map(|plan| plan.slots.main.len())
        .sum();
    main.max(1) + SPARE_TURN_WORKERS
}

/// A lane's first work, waiting for a worker.
pub(super) struct Job {
    pub id: SessionId,
    pub first: Work,
    pub stop: Arc<Stop>,
}

/// The worker threads, by what they do now.
#[derive(Default)]
struct Crew {
    /// How many should be at work ([`turn_workers`]).
    target: usize,
    /// Threads running (at work, idle or parked).
    alive: usize,
    /// Threads whose turn waits for the owner.
    parked: usize,
    /// Threads waiting for a lane.
    idle: usize,
    /// Threads started so far (their names' numbers).
    started: usize,
}

impl Crew {
    /// The threads not parked.
    fn at_work(&self) -> usize {
        self.alive.saturating_sub(self.parked)
    }

    /// Whether `waiting` lanes need a thread started: more wait than idle threads can take,
    /// fewer than the target are at work, and [`MAX_PARKED_WORKERS`] allows one more.
    fn short(&self, waiting: usize) -> bool {
        waiting > self.idle
            && self.at_work() < self.target
            && self.alive < self.target + MAX_PARKED_WORKERS
    }
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
    crew: Crew,
}

/// The ready queue the workers take lanes from, and the workers themselves.
#[derive(Default)]
pub(super) struct Ready {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// The engine the workers serve, set at [`start`].
    engine: OnceLock<Weak<Inner>>,
}

impl Ready {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts a lane in the queue, or gives the job back when `max` lanes wait already.
    pub fn push(self: &Arc<Self>, job: Job, max: usize) -> Result<(), Box<Job>> {
        let mut queue = self.lock();
        if queue.jobs.len() >= max {
            return Err(Box::new(job));
        }
        queue.jobs.push_back(job);
        let short = queue.crew.short(queue.jobs.len());
        drop(queue);
        self.wake.notify_one();
        if short {
            self.add_worker();
        }
        Ok(())
    }

    /// A worker's turn waits for brokerd or the owner from now on: a thread is started in its
    /// place when lanes wait for one.
    pub fn park(self: &Arc<Self>) {
        let mut queue = self.lock();
        queue.crew.parked += 1;
        let short = !queue.closed && queue.crew.short(queue.jobs.len());
        drop(queue);
        if short {
            self.add_worker();
        }
    }

    /// A parked worker's turn goes on. One worker beyond the target at work now, if idle, is
    /// woken to end.
    pub fn unpark(&self) {
        let mut queue = self.lock();
        queue.crew.parked = queue.crew.parked.saturating_sub(1);
        let surplus = queue.crew.at_work() > queue.crew.target && queue.crew.idle > 0;
        drop(queue);
        if surplus {
            self.wake.notify_one();
        }
    }

    /// How many worker threads run now (at work, idle or parked).
    #[cfg(test)]
    pub fn alive(&self) -> usize {
        self.lock().crew.alive
    }

    /// The next lane, waiting for one; `None` once the queue is closed, or when this worker is
    /// one more than the target at work (it ends).
    fn next(&self) -> Option<Job> {
        let mut queue = self.lock();
        loop {
            if queue.closed {
                queue.crew.alive = queue.crew.alive.saturating_sub(1);
                return None;
            }
            if queue.crew.at_work() > queue.crew.target {
                queue.crew.alive = queue.crew.alive.saturating_sub(1);
                if !queue.jobs.is_empty() {
                    // It may have been woken for that lane: another takes it.
                    self.wake.notify_one();
                }
                return None;
            }
            if let Some(job) = queue.jobs.pop_front() {
                return Some(job);
            }
            queue.crew.idle += 1;
            queue = self.wake.wait(queue).unwrap_or_else(|p| p.into_inner());
            queue.crew.idle -= 1;
        }
    }

    /// Ends the workers: every one waiting returns, and none takes another lane.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
    }

    /// Starts one more worker thread; a failure is logged (the lanes wait for a worker).
    fn add_worker(self: &Arc<Self>) {
        if let Err(e) = self.spawn() {
            tracing::error!(error = %e, "cannot start another turn worker");
        }
    }

    fn spawn(self: &Arc<Self>) -> std::io::Result<()> {
        let Some(engine) = self.engine.get().cloned() else {
            return Ok(());
        };
        let n = {
            let mut queue = self.lock();
            queue.crew.alive += 1;
            queue.crew.started += 1;
            queue.crew.started
        };
        let ready = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(format!("turn-worker-{n}"))
            .spawn(move || run(&engine, &ready));
        if spawned.is_err() {
            let mut queue = self.lock();
            queue.crew.alive = queue.crew.alive.saturating_sub(1);
        }
        spawned.map(drop)
    }
}

/// Starts the workers over `ready`, running lanes of `inner` while it lives; how many are at
/// work.
pub(super) fn start(inner: &Arc<Inner>, ready: &Arc<Ready>) -> std::io::Result<usize> {
    let workers = turn_workers(&inner.parts.cfg);
    let _ = ready.engine.set(Arc::downgrade(inner));
    ready.lock().crew.target = workers;
    for _ in 0..workers {
        ready.spawn()?;
    }
    Ok(workers)
}

fn run(inner: &Weak<Inner>, ready: &Ready) {
    while let Some(job) = ready.next() {
        let Some(inner) = inner.upgrade() else {
            let mut queue = ready.lock();
            queue.crew.alive = queue.crew.alive.saturating_sub(1);
            return;
        };
        // Each piece of work catches its own panic; this keeps the worker for a panic in the
        // lane's bookkeeping around them.
        let id = job.id.clone();
        let _ = super::unwind::catch("a turn worker", &id, || {
            super::worker::work(&inner, &job.id, job.first, job.stop)
        });
    }
}
