//! The pool of turn workers: [`turn_workers`] threads, started with the engine, that take lanes
//! with work from one bounded ready queue. However many sessions submit at once, loopd runs
//! this many turn threads: one per main slot of every endpoint, so that as many turns are in
//! flight as the model servers serve at once (issue 36: a GPU server's 32 or 64 slots), and
//! [`SPARE_TURN_WORKERS`] more. A lane waits in the queue (not on a thread of its own) until a
//! worker is free. A worker runs its lane's work to the end of the lane's queue (one writer per
//! log), then takes the next lane.
//!
//! The workers hold the engine weakly while idle, so an engine that every handle dropped is
//! freed, and its workers, told so by the queue, end.

use super::Inner;
use super::lane::Work;
use crate::config::Config;
use crate::runtime::Stop;
use bxcore::SessionId;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

/// Turn worker threads beside one per main slot: for sessions waiting for a main slot or the
/// owner, and the background slot's work after turns (summaries, compaction), which holds a
/// worker while it waits for that slot. With the default single main slot the pool has 8.
pub const SPARE_TURN_WORKERS: usize = 7;

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

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    closed: bool,
}

/// The ready queue the workers take lanes from.
#[derive(Default)]
pub(super) struct Ready {
    queue: Mutex<Queue>,
    wake: Condvar,
}

impl Ready {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts a lane in the queue, or gives the job back when `max` lanes wait already.
    pub fn push(&self, job: Job, max: usize) -> Result<(), Box<Job>> {
        let mut queue = self.lock();
        if queue.jobs.len() >= max {
            return Err(Box::new(job));
        }
        queue.jobs.push_back(job);
        drop(queue);
        self.wake.notify_one();
        Ok(())
    }

    /// The next lane, waiting for one; `None` once the queue is closed.
    fn next(&self) -> Option<Job> {
        let mut queue = self.lock();
        loop {
            if queue.closed {
                return None;
            }
            if let Some(job) = queue.jobs.pop_front() {
                return Some(job);
            }
            queue = self.wake.wait(queue).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Ends the workers: every one waiting returns, and none takes another lane.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_all();
    }
}

/// Starts the workers over `ready`, running lanes of `inner` while it lives; how many.
pub(super) fn start(inner: &Arc<Inner>, ready: &Arc<Ready>) -> std::io::Result<usize> {
    let workers = turn_workers(&inner.parts.cfg);
    for n in 0..workers {
        let (inner, ready) = (Arc::downgrade(inner), Arc::clone(ready));
        std::thread::Builder::new()
            .name(format!("turn-worker-{n}"))
            .spawn(move || run(&inner, &ready))?;
    }
    Ok(workers)
}

fn run(inner: &Weak<Inner>, ready: &Ready) {
    while let Some(job) = ready.next() {
        let Some(inner) = inner.upgrade() else {
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
