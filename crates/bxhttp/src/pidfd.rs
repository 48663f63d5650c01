//! A process held by its pidfd, so that its pid number, reused by another process once it has
//! exited, is never taken for it. Who is at the other end of a Unix socket is a pid
//! (`SO_PEERCRED`), and a pid is a number the kernel hands out again; `SO_PEERPIDFD` (Linux
//! 6.5) gives a pidfd bound to the process that connected (or listened) itself. Reading
//! `/proc/self/fdinfo/<fd>` tells the pid that process holds now, `-1` once it has exited: a
//! check that read `/proc/<pid>` and then finds its pidfd still holding `pid` read that very
//! process.
//!
//! - [`PeerPidfd`]: the process that connected to a server's socket, taken at accept and
//!   carried by each request in `peer::PeerUser` (loopd checks it after walking the
//!   peer's parents: `loopd::api::owner`).
//! - [`Pinned`]: a process a client's connection reached, the one that listens (brokerd, as
//!   loopd's kept connections learn it: `pool::Pool::servers`), with its start time.
//!
//! Where the kernel has no `SO_PEERPIDFD`, the start time read from `/proc/<pid>/stat` right
//! after connecting stands in for the pidfd (a pid reused within one clock tick of the
//! process's exit would pass), and a peer is taken as it is (the walk's own race is open).

use crate::ancestry::{Ancestor, DescentError, ProcessTable, Procfs};
use nix::sys::socket::getsockopt;
use nix::sys::socket::sockopt::{PeerCredentials, PeerPidfd as PeerPidfdOption};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

/// Why a process could not be held, or is no longer the one held.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PidfdError {
    /// The kernel gave no pid for the socket's peer: it is in another pid namespace.
    #[error("the kernel gave no pid for the process at the other end of the socket")]
    NoPid,
    /// The process has exited: its pidfd says so, or it had no pidfd left to give.
    #[error("process {0} has exited")]
    Exited(u32),
    /// Its pid now names another process (a pidfd that holds another pid, or another start
    /// time at `/proc/<pid>/stat`).
    #[error("process {0} is not the one that was there: its pid was reused")]
    Reused(u32),
    /// The pidfd or `/proc` could not be read.
    #[error("cannot read what process {pid} is: {detail}")]
    Unreadable {
        /// The process.
        pid: u32,
        /// What failed.
        detail: String,
    },
}

/// The pidfd of the process at the other end of `stream`: `Ok(None)` where the kernel has no
/// `SO_PEERPIDFD` (before Linux 6.5); [`PidfdError::Exited`] when that process is gone.
pub fn peer_pidfd(stream: &impl AsFd, pid: u32) -> Result<Option<OwnedFd>, PidfdError> {
    match getsockopt(stream, PeerPidfdOption) {
        Ok(fd) => Ok(Some(fd)),
        Err(nix::errno::Errno::ENOPROTOOPT | nix::errno::Errno::EINVAL) => Ok(None),
        Err(nix::errno::Errno::ESRCH) => Err(PidfdError::Exited(pid)),
        Err(e) => Err(PidfdError::Unreadable {
            pid,
            detail: format!("cannot take its pidfd: {e}"),
        }),
    }
}

/// The `Pid:` of a pidfd's `/proc/self/fdinfo` text: the pid its process holds now, -1 once
/// it has exited; `None` when there is no such line.
pub fn pidfd_pid_in(fdinfo: &str) -> Option<i64> {
    fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("Pid:"))
        .and_then(|value| value.trim().parse().ok())
}

/// Whether `pidfd`'s process still holds `pid`: the one check after reading `/proc/<pid>`.
pub fn holds(pidfd: &impl AsRawFd, pid: u32) -> Result<(), PidfdError> {
    let path = format!("/proc/self/fdinfo/{}", pidfd.as_raw_fd());
    let text = std::fs::read_to_string(&path).map_err(|e| PidfdError::Unreadable {
        pid,
        detail: format!("cannot read {path}: {e}"),
    })?;
    same_process(pid, pidfd_pid_in(&text))
}

/// Whether a pidfd whose process holds `now` (from its fdinfo) is still process `pid`.
pub fn same_process(pid: u32, now: Option<i64>) -> Result<(), PidfdError> {
    match now {
        Some(now) if now == i64::from(pid) => Ok(()),
        Some(-1) => Err(PidfdError::Exited(pid)),
        Some(_) => Err(PidfdError::Reused(pid)),
        None => Err(PidfdError::Unreadable {
            pid,
            detail: String::from("its pidfd's fdinfo has no Pid: line"),
        }),
    }
}

/// What the kernel gave for a peer's pidfd at accept.
#[derive(Debug)]
enum Pin {
    /// The pidfd.
    Held(OwnedFd),
    /// None: the kernel has no `SO_PEERPIDFD`.
    NotOffered,
    /// None: why not (the peer had exited, no pid).
    Failed(PidfdError),
}

/// The process that connected to a server's socket, held by its pidfd from accept on. Clones
/// share the one descriptor.
#[derive(Debug, Clone)]
pub struct PeerPidfd(Arc<Pin>);

impl PeerPidfd {
    /// Takes the pidfd of `stream`'s peer, which the kernel gave as `pid`. Never fails: what
    /// went wrong is kept for [`PeerPidfd::still_holds`] to say.
    pub fn take(stream: &impl AsFd, pid: Option<i32>) -> PeerPidfd {
        let pin = match pid
            .and_then(|pid| u32::try_from(pid).ok())
            .filter(|p| *p > 0)
        {
            None => Pin::Failed(PidfdError::NoPid),
            Some(pid) => match peer_pidfd(stream, pid) {
                Ok(Some(fd)) => Pin::Held(fd),
                Ok(None) => Pin::NotOffered,
                Err(e) => Pin::Failed(e),
            },
        };
        PeerPidfd(Arc::new(pin))
    }

    /// A pidfd taken elsewhere (tests).
    pub fn from_fd(fd: OwnedFd) -> PeerPidfd {
        PeerPidfd(Arc::new(Pin::Held(fd)))
    }

    /// Whether the process that connected still holds `pid`, the pid the kernel gave for it:
    /// checked after reading `/proc/<pid>`, it proves that what was read was that process.
    /// Without `SO_PEERPIDFD` this passes (the race is open there).
    pub fn still_holds(&self, pid: u32) -> Result<(), PidfdError> {
        match &*self.0 {
            Pin::Held(fd) => holds(fd, pid),
            Pin::NotOffered => Ok(()),
            Pin::Failed(e) => Err(e.clone()),
        }
    }
}

/// A process at the other end of a client's connection (the one that listens), held by its
/// pidfd and its start time, so that it is known to be the same process later, or gone.
#[derive(Debug)]
pub struct Pinned {
    pub(crate) pid: u32,
    pub(crate) start_ticks: u64,
    pub(crate) pidfd: Option<OwnedFd>,
}

impl Pinned {
    /// The process at the other end of `stream` (`SO_PEERCRED`'s pid, `SO_PEERPIDFD`) and its
    /// start time, read from `/proc/<pid>/stat` and confirmed by the pidfd.
    pub fn peer_of(stream: &impl AsFd) -> Result<Pinned, PidfdError> {
        let pid = getsockopt(stream, PeerCredentials)
            .ok()
            .and_then(|c| u32::try_from(c.pid()).ok())
            .filter(|pid| *pid > 0)
            .ok_or(PidfdError::NoPid)?;
        let pidfd = peer_pidfd(stream, pid)?;
        let start_ticks = start_ticks(pid)?;
        if let Some(fd) = &pidfd {
            holds(fd, pid)?;
        }
        Ok(Pinned {
            pid,
            start_ticks,
            pidfd,
        })
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// When it started, in clock ticks since boot.
    pub fn start_ticks(&self) -> u64 {
        self.start_ticks
    }

    /// Whether it is the same process as `other` (the same pid and start time).
    pub fn same_as(&self, other: &Pinned) -> bool {
        self.pid == other.pid && self.start_ticks == other.start_ticks
    }

    /// Whether it still runs as the process it was: its pidfd still holds its pid, or (without
    /// a pidfd) its pid's start time is unchanged.
    pub fn alive(&self) -> Result<(), PidfdError> {
        match &self.pidfd {
            Some(fd) => holds(fd, self.pid),
            None if start_ticks(self.pid)? == self.start_ticks => Ok(()),
            None => Err(PidfdError::Reused(self.pid)),
        }
    }

    /// It, as the ancestor the walk looks for: its parent read now, and only if it is still
    /// itself after that read.
    pub fn ancestor(&self) -> Result<Ancestor, PidfdError> {
        let ancestor = Ancestor::process(self.pid).map_err(|e| match e {
            DescentError::Gone(pid) => PidfdError::Exited(pid),
            e => PidfdError::Unreadable {
                pid: self.pid,
                detail: e.to_string(),
            },
        })?;
        if ancestor.start_ticks != self.start_ticks {
            return Err(PidfdError::Reused(self.pid));
        }
        self.alive()?;
        Ok(ancestor)
    }
}

/// Process `pid`'s start time; [`PidfdError::Exited`] when there is no such process.
fn start_ticks(pid: u32) -> Result<u64, PidfdError> {
    match Procfs.entry(pid) {
        Ok(entry) => Ok(entry.start_ticks),
        Err(DescentError::Gone(pid)) => Err(PidfdError::Exited(pid)),
        Err(e) => Err(PidfdError::Unreadable {
            pid,
            detail: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests;
