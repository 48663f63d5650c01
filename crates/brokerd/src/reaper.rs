//! brokerd as its descendants' child subreaper: an orphan of an MCP server (a double fork) is
//! reparented to brokerd, not to init, so it stays brokerd's descendant and the socket's peer
//! check (`server::descent`) still refuses it. A subreaper must reap what it adopts.
//!
//! [`become_subreaper`] sets `PR_SET_CHILD_SUBREAPER` (the daemon does, before it starts any MCP
//! server). [`Reaper`] then reaps, at each `SIGCHLD`, every zombie child of brokerd that
//! brokerd did not spawn itself. The ones it did spawn (MCP servers, through [`spawn_registered`])
//! are tokio's to reap: `waitpid(-1)` would steal their exit statuses, so the reaper never calls
//! it. It scans `/proc` for zombies whose parent is brokerd, leaves out the registered pids (a
//! pid with the start time it had when spawned, so a reused pid is not mistaken for one), and
//! `waitpid`s each of the rest by pid. Spawning and the scan hold the same lock, so a child is
//! registered before the reaper can see it.
//!
//! What this does not do: kill the orphans (issue 13's business), or give an MCP server a
//! parent-death signal (`PR_SET_PDEATHSIG` must be set in the child between fork and exec,
//! which needs `unsafe` `pre_exec`, and it fires when the spawning thread exits, which in a
//! tokio pool is not when brokerd does).

use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::io;
use std::sync::{Mutex, PoisonError};
use tokio::signal::unix::{SignalKind, signal};
use tokio::task::JoinHandle;

/// The children brokerd spawned and waits for itself: pid → start time (clock ticks after
/// boot, `/proc/<pid>/stat`). One per process, as the children and the subreaper flag are.
static SPAWNED: Mutex<BTreeMap<u32, u64>> = Mutex::new(BTreeMap::new());

/// Makes this process the child subreaper of all its descendants.
pub fn become_subreaper() -> Result<(), nix::Error> {
    nix::sys::prctl::set_child_subreaper(true)
}

/// Runs `spawn`, which starts a child that brokerd will wait for itself, and registers the pid
/// `pid_of` gives, with the registry locked throughout, so the reaper never takes that child.
pub fn spawn_registered<T>(
    spawn: impl FnOnce() -> io::Result<T>,
    pid_of: impl FnOnce(&T) -> Option<u32>,
) -> io::Result<T> {
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    let child = spawn()?;
    // A child already reaped has no start time: there is nothing left to protect.
    if let Some((pid, start)) = pid_of(&child).and_then(|pid| Some((pid, start_time(pid)?))) {
        spawned.insert(pid, start);
    }
    Ok(child)
}

/// The start time of process `pid`, or `None` once it is gone.
fn start_time(pid: u32) -> Option<u64> {
    let stat = procfs::process::Process::new(i32::try_from(pid).ok()?)
        .and_then(|p| p.stat())
        .ok()?;
    Some(stat.starttime)
}

/// The zombie children of process `own_pid`: pid and start time of each.
fn zombie_children(own_pid: i32) -> Vec<(u32, u64)> {
    let processes = match procfs::process::all_processes() {
        Ok(processes) => processes,
        Err(e) => {
            tracing::warn!("cannot list /proc to reap orphans: {e}");
            return Vec::new();
        }
    };
    processes
        .filter_map(|p| p.and_then(|p| p.stat()).ok())
        .filter(|stat| stat.ppid == own_pid && stat.state == 'Z')
        .filter_map(|stat| Some((u32::try_from(stat.pid).ok()?, stat.starttime)))
        .collect()
}

/// Reaps every zombie child of brokerd that it did not spawn; returns their pids. Forgets the
/// spawned pids that have since been reaped. Reads `/proc`: call off the async workers.
pub fn reap_adopted() -> Vec<u32> {
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    spawned.retain(|&pid, &mut start| start_time(pid) == Some(start));
    let own_pid = i32::try_from(std::process::id()).unwrap_or(i32::MAX);
    let mut reaped = Vec::new();
    for (pid, start) in zombie_children(own_pid) {
        if spawned.get(&pid) == Some(&start) {
            continue; // tokio's to reap
        }
        let Ok(raw) = i32::try_from(pid) else {
            continue;
        };
        match waitpid(Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(status) => {
                tracing::info!(pid, ?status, "reaped an adopted orphan");
                reaped.push(pid);
            }
            // Reaped meanwhile by whoever waits on its process group: nothing left to do.
            Err(nix::errno::Errno::ECHILD) => {}
            Err(e) => tracing::warn!(pid, "cannot reap an adopted orphan: {e}"),
        }
    }
    reaped
}

/// The task that reaps adopted orphans at each `SIGCHLD`; stops when dropped.
#[derive(Debug)]
pub struct Reaper {
    task: JoinHandle<()>,
}

impl Reaper {
    /// Listens for `SIGCHLD` and reaps once now, then after each. Must be called inside a tokio
    /// runtime.
    pub fn start() -> io::Result<Reaper> {
        let mut sigchld = signal(SignalKind::child())?;
        let task = tokio::spawn(async move {
            loop {
                if let Err(e) = tokio::task::spawn_blocking(reap_adopted).await {
                    tracing::error!("the orphan reaper failed: {e}");
                }
                // A SIGCHLD that comes during the scan wakes this at once: none is missed.
                if sigchld.recv().await.is_none() {
                    break;
                }
            }
        });
        Ok(Reaper { task })
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        self.task.abort();
    }
}
