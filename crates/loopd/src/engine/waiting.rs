//! The cap on tasks waiting across all sessions (`[api] max_waiting_tasks`): each waiting task
//! holds a [`Waiting`] place from its submission until its user record is durable or it is
//! refused, so loopd never holds more waiting tasks (and the memory they take) than the cap,
//! however many sessions submit at once.

use crate::api::ApiFailure;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The count of tasks waiting now.
#[derive(Debug, Default)]
pub(super) struct Waiters(AtomicUsize);

/// One waiting task's place; given back when dropped.
#[derive(Debug)]
pub struct Waiting(Arc<Waiters>);

impl Waiters {
    /// How many tasks wait now.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// A place for one more waiting task, or 429 when `max` wait already.
    pub fn take(waiters: &Arc<Waiters>, max: usize) -> Result<Waiting, ApiFailure> {
        let taken = waiters
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            });
        match taken {
            Ok(_) => Ok(Waiting(Arc::clone(waiters))),
            Err(_) => Err(ApiFailure::TooManyWaiting(format!(
                "{max} tasks are waiting already ([api] max_waiting_tasks): submit this one \
                 again once some have started"
            ))),
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::SeqCst);
    }
}
