//! The processes that answered a client's connections to one socket, each held by its pidfd
//! ([`Pinned`]) for as long as it runs: who serves that socket, as the kernel named it on
//! connections the client made itself, never as whatever a path leads to when asked.
//!
//! loopd learns brokerd this way (its kept connections, `pool::Pool`) and refuses
//! answers to approvals from every listed process's descendants. The list only grows while its
//! processes run: a process that takes over the socket's path adds itself, it does not push
//! brokerd out. An exited process goes at the next look, so a restarted brokerd replaces the
//! old one. The list is bounded ([`MAX_SERVER_PROCESSES`]); past it, nothing can be told.

use crate::pidfd::{PidfdError, Pinned};
use std::sync::{Arc, Mutex};

/// The most live processes kept for one socket. One is brokerd; more come only from processes
/// that took over its path while brokerd ran.
pub const MAX_SERVER_PROCESSES: usize = 16;

/// Why the servers of a socket cannot be told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServersError {
    /// None of the processes that answered is still running, or none ever answered.
    #[error("no process that answered on the socket is running")]
    NoneRunning,
    /// More than [`MAX_SERVER_PROCESSES`] processes answered on the socket while running at
    /// once; one that was not kept may be any of them.
    #[error(
        "more than {MAX_SERVER_PROCESSES} running processes have answered on the socket \
         (something keeps taking its path over); restart the client to forget them"
    )]
    Overflowed,
}

#[derive(Debug, Default)]
struct Inner {
    live: Vec<Arc<Pinned>>,
    overflowed: bool,
}

/// The running processes that answered on one socket; shared by a pool's clones.
#[derive(Debug, Default)]
pub struct Servers {
    inner: Mutex<Inner>,
}

impl Servers {
    /// Notes the process a new connection reached (`Pinned::peer_of` its stream): kept unless
    /// it is already listed. One the kernel could not name is logged and left out: it cannot
    /// have descendants this process could see either.
    pub fn note(&self, reached: Result<Pinned, PidfdError>, socket: &std::path::Path) {
        let process = match reached {
            Ok(process) => process,
            Err(e) => {
                tracing::warn!(socket = %socket.display(), error = %e, "cannot tell which process answered on the socket");
                return;
            }
        };
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.live.iter().any(|known| known.same_as(&process)) {
            return;
        }
        inner.live.retain(|known| !gone(known));
        if inner.live.len() >= MAX_SERVER_PROCESSES {
            tracing::error!(socket = %socket.display(), pid = process.pid(), "{}", ServersError::Overflowed);
            inner.overflowed = true;
            return;
        }
        tracing::debug!(socket = %socket.display(), pid = process.pid(), "a process answers on the socket");
        inner.live.push(Arc::new(process));
    }

    /// The processes that answered and still run (exited ones are forgotten here).
    pub fn running(&self) -> Result<Vec<Arc<Pinned>>, ServersError> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.overflowed {
            return Err(ServersError::Overflowed);
        }
        inner.live.retain(|known| !gone(known));
        if inner.live.is_empty() {
            return Err(ServersError::NoneRunning);
        }
        Ok(inner.live.clone())
    }
}

/// Whether `process` is known to have exited (or its pid to name another process now). One
/// that cannot be read is kept: the check that uses it then fails, rather than forgetting it.
fn gone(process: &Pinned) -> bool {
    matches!(
        process.alive(),
        Err(PidfdError::Exited(_) | PidfdError::Reused(_))
    )
}

#[cfg(test)]
mod tests;
