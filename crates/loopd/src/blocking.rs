//! The one way loopd's plain threads wait for async work: [`Blocking::wait`].
//!
//! The clients (`llama::Client`, `broker::Broker`) are async only. Turns run on threads of
//! their own (a turn's log append waits for `fdatasync`, which must not hold an async worker),
//! and those threads, the daemon's start and the `ToolPort` impl of `Broker` wait for the
//! clients' futures through this adapter on loopd's multi-thread runtime. Called on a thread
//! that is in the runtime's context (inside an async task, or `spawn_blocking`), where tokio's
//! `block_on` would panic or tie up a thread the runtime needs, it answers [`OnRuntimeThread`]
//! instead, so the mistake is an error naming itself, not a panic.

use std::future::Future;
use tokio::runtime::Handle;

/// A blocking wait asked for on a thread of the async runtime: there, await the future.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "a blocking wait was asked for on a thread of loopd's async runtime; it is only for turn \
     threads (async code awaits instead)"
)]
pub struct OnRuntimeThread;

/// Runs futures to their end on loopd's runtime for a thread that is not the runtime's (a turn
/// thread). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Blocking {
    handle: Handle,
}

impl Blocking {
    /// An adapter that runs what it waits for on `handle` (a multi-thread runtime's, so the
    /// runtime's own threads drive the I/O while the caller's thread waits).
    pub fn new(handle: Handle) -> Blocking {
        Blocking { handle }
    }

    /// The runtime the waits run on (for a timer task that goes with a blocking wait).
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Runs `work` to its end and returns what it gave; blocks the calling thread meanwhile.
    /// For turn threads: on a thread in the runtime's context it runs nothing and answers
    /// [`OnRuntimeThread`] (as the error type `E` of `work`, which every client error takes).
    pub fn wait<T, E, F>(&self, work: F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<OnRuntimeThread>,
    {
        if Handle::try_current().is_ok() {
            tracing::error!("{OnRuntimeThread}");
            return Err(OnRuntimeThread.into());
        }
        self.handle.block_on(work)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_plain_thread_gets_what_the_future_gave() {
        let runtime = runtime();
        let blocking = Blocking::new(runtime.handle().clone());
        let got: Result<u32, OnRuntimeThread> = blocking.wait(async {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            Ok(7)
        });
        assert_eq!(got, Ok(7));
    }

    #[test]
    fn a_wait_inside_an_async_task_is_an_error_that_names_the_mistake_not_a_panic() {
        let runtime = runtime();
        let blocking = Blocking::new(runtime.handle().clone());
        let inner = blocking.clone();
        let got = runtime.block_on(async move {
            tokio::spawn(async move { inner.wait(async { Ok::<u32, OnRuntimeThread>(7) }) }).await
        });
        let got = got.unwrap();
        assert_eq!(got, Err(OnRuntimeThread));
        assert!(
            OnRuntimeThread
                .to_string()
                .contains("only for turn threads")
        );
        // The adapter still works from a plain thread afterwards.
        assert_eq!(
            blocking.wait(async { Ok::<u32, OnRuntimeThread>(8) }),
            Ok(8)
        );
    }

    #[test]
    fn a_wait_in_spawn_blocking_is_refused_too() {
        let runtime = runtime();
        let blocking = Blocking::new(runtime.handle().clone());
        let waiting =
            runtime.spawn_blocking(move || blocking.wait(async { Ok::<u32, OnRuntimeThread>(7) }));
        let got = runtime.block_on(waiting);
        assert_eq!(got.unwrap(), Err(OnRuntimeThread));
    }
}
