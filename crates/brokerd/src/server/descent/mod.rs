//! Whether a peer is one of brokerd's own descendants (an MCP server, or anything one started),
//! which may never use brokerd's socket.
//!
//! Why a process check and not a permission: MCP servers run as brokerd's own user, so no file
//! mode, directory or secret stops them (they can `chmod`, read `/proc/<pid>/environ` of the
//! same user, and so on). What they cannot change is that they descend from brokerd. The kernel
//! names the process that connected (`SO_PEERCRED`'s pid); brokerd walks its parents in `/proc`
//! and refuses it if brokerd is among them. brokerd's own pid is allowed (in-process clients,
//! as in the tests). Double-forking does not escape: brokerd is its descendants' child
//! subreaper (`reaper`), so an orphan is reparented to brokerd, not to init.
//!
//! The walk stops, "not a descendant", at pid 1, at brokerd's parent (`getppid`, loopd's parent
//! boxd is brokerd's parent too), or at a process that started before brokerd (it cannot descend
//! from a process younger than itself), so it seldom reads more than the peer itself and never
//! needs to read processes that `ProtectProc=invisible` hides. Anything it cannot decide is
//! refused (fail closed): a peer whose pid the kernel does not give, one outside brokerd's pid
//! namespace (pid 0), a process in the chain that is gone or hidden, a chain longer than
//! [`ANCESTRY_MAX_PROCESSES`]. A step reads one `/proc/<pid>/stat` with a small parser of its
//! own: this runs for every connection.
//!
//! The pid is a number, and numbers are reused: a descendant that connects, exits and is
//! reaped before brokerd looks could leave its pid to an unrelated process. Where the kernel
//! offers `SO_PEERPIDFD` (Linux 6.5), brokerd also takes the peer's pidfd, which stays bound to
//! the process that connected, and after the walk checks (`/proc/self/fdinfo`) that this
//! process still holds that pid; otherwise it refuses. On older kernels that last race is open.
//!
//! Limits, by design of a same-uid check: a descendant that gets a process started outside
//! brokerd's tree (cron, `systemd-run --user`, ssh to localhost) is not caught; nor is one that
//! can ptrace loopd or brokerd (same uid, Yama `ptrace_scope` 0), since it can then act from
//! inside them. A separate uid for MCP servers would close both but needs brokerd to run as
//! root; docs/ARCHITECTURE.md says so.

use nix::sys::socket::{getsockopt, sockopt::PeerPidfd};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

pub use bxhttp::ancestry::{
    ANCESTRY_MAX_PROCESSES, Ancestor as Brokerd, DescentError, Entry, ProcessTable, Procfs,
    parse_stat,
};

/// How many processes a check walks on the async worker before it hands the rest of the walk to
/// the blocking pool: enough for every chain brokerd meets (loopd: one), few enough that a
/// deep chain built to slow brokerd down costs the async workers next to nothing.
pub const INLINE_WALK_PROCESSES: usize = 8;

/// The pidfd of the process that connected on `stream`: `Ok(None)` where the kernel has no
/// `SO_PEERPIDFD` (before Linux 6.5); an error when the peer is already gone.
pub(super) fn peer_pidfd(stream: &impl AsFd) -> Result<Option<OwnedFd>, String> {
    match getsockopt(stream, PeerPidfd) {
        Ok(fd) => Ok(Some(fd)),
        Err(nix::errno::Errno::ENOPROTOOPT | nix::errno::Errno::EINVAL) => Ok(None),
        Err(nix::errno::Errno::ESRCH) => Err(String::from("the peer process is already gone")),
        Err(e) => Err(format!("cannot take the peer's pidfd: {e}")),
    }
}

/// The `Pid:` of a pidfd's `/proc/self/fdinfo` text: the pid its process holds now, -1 once
/// it has been reaped; `None` when there is no such line.
pub fn pidfd_pid_in(fdinfo: &str) -> Option<i64> {
    fdinfo
        .lines()
        .find_map(|line| line.strip_prefix("Pid:"))
        .and_then(|value| value.trim().parse().ok())
}

/// Checks the peer process `pid` (with its `pidfd`, where the kernel gave one) for `brokerd`,
/// reading at most `max_processes` processes of `/proc`: `None` when that was not enough to
/// tell; else the verdict, the error saying why the peer is refused.
pub(super) fn check(
    pid: Option<i32>,
    brokerd: Brokerd,
    pidfd: Option<&OwnedFd>,
    max_processes: usize,
) -> Option<Result<(), String>> {
    let pid = match peer_pid(pid) {
        Ok(pid) => pid,
        Err(why) => return Some(Err(why)),
    };
    let verdict = match brokerd.is_ancestor_within(pid, &Procfs, max_processes) {
        Ok(None) if max_processes < ANCESTRY_MAX_PROCESSES => return None,
        Ok(None) => Err(DescentError::TooDeep(pid)),
        Ok(Some(verdict)) => Ok(verdict),
        Err(e) => Err(e),
    };
    // Only now, after the walk: if the process that connected still holds `pid`, the walk read
    // that process, not a later one given the same number.
    if let Some(fd) = pidfd {
        let path = format!("/proc/self/fdinfo/{}", fd.as_raw_fd());
        let same = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {path} for the peer's pidfd: {e}"))
            .and_then(|text| same_process(pid, pidfd_pid_in(&text)));
        if let Err(why) = same {
            return Some(Err(why));
        }
    }
    Some(match verdict {
        Ok(false) => Ok(()),
        Ok(true) => Err(format!(
            "process {pid} is brokerd's own descendant (an MCP server, or something one \
             started); they may not call brokerd"
        )),
        Err(e) => Err(format!(
            "cannot tell whether process {pid} is brokerd's own descendant: {e}"
        )),
    })
}

/// The peer's pid as the kernel gave it, or why brokerd cannot use it.
fn peer_pid(pid: Option<i32>) -> Result<u32, String> {
    match pid.map(u32::try_from) {
        Some(Ok(pid)) if pid > 0 => Ok(pid),
        Some(_) => Err(String::from(
            "the peer is outside brokerd's pid namespace, so brokerd cannot tell whether it is \
             one of its own MCP servers",
        )),
        None => Err(String::from("the kernel did not give the peer's pid")),
    }
}

/// Whether the pidfd's process (holding `now`, from its fdinfo) is still the one that had
/// `pid` when it connected.
fn same_process(pid: u32, now: Option<i64>) -> Result<(), String> {
    match now {
        Some(now) if now == i64::from(pid) => Ok(()),
        Some(-1) => Err(format!(
            "the peer process {pid} exited while it was being checked"
        )),
        Some(other) => Err(format!(
            "the peer process {pid} is pid {other} in brokerd's /proc; refusing"
        )),
        None => Err(String::from(
            "the peer's pidfd has no Pid: line in its fdinfo",
        )),
    }
}

#[cfg(test)]
mod tests;
