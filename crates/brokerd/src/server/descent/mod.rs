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

/// The most processes walked up from a peer towards init; a longer chain is refused.
pub const ANCESTRY_MAX_PROCESSES: usize = 4_096;

/// How many processes a check walks on the async worker before it hands the rest of the walk to
/// the blocking pool: enough for every chain brokerd meets (loopd: one), few enough that a
/// deep chain built to slow brokerd down costs the async workers next to nothing.
pub const INLINE_WALK_PROCESSES: usize = 8;

/// Why a process's place in the process tree could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DescentError {
    /// `/proc/<pid>` does not exist (for brokerd): the process exited, or is hidden.
    #[error("process {0} is gone or hidden from brokerd (/proc/{0})")]
    Gone(u32),
    /// `/proc/<pid>/stat` could not be read or parsed.
    #[error("cannot read /proc/{pid}/stat: {detail}")]
    Unreadable {
        /// The process.
        pid: u32,
        /// What failed.
        detail: String,
    },
    /// The chain of parents is longer than [`ANCESTRY_MAX_PROCESSES`].
    #[error("the parents of process {0} go on past {ANCESTRY_MAX_PROCESSES} processes")]
    TooDeep(u32),
}

/// What the walk reads of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Its parent: 0 for pid 1, or for a process whose parent lies outside brokerd's pid
    /// namespace.
    pub parent: u32,
    /// When it started, in clock ticks since boot (`/proc/<pid>/stat`'s `starttime`).
    pub start_ticks: u64,
}

/// Where processes are looked up: `/proc` ([`Procfs`]), or a fake one in tests.
pub trait ProcessTable {
    /// Process `pid`'s parent and start time.
    fn entry(&self, pid: u32) -> Result<Entry, DescentError>;
}

/// The real process table, read from `/proc`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Procfs;

impl ProcessTable for Procfs {
    fn entry(&self, pid: u32) -> Result<Entry, DescentError> {
        let path = format!("/proc/{pid}/stat");
        let text = std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => DescentError::Gone(pid),
            _ => DescentError::Unreadable {
                pid,
                detail: e.to_string(),
            },
        })?;
        parse_stat(&text).ok_or_else(|| DescentError::Unreadable {
            pid,
            detail: String::from("not the stat line the kernel writes"),
        })
    }
}

/// The parent and start time in the text of a `/proc/<pid>/stat`: after the command (in
/// parentheses, which may itself hold any bytes, so the last `)` ends it) come the state, the
/// parent (field 4) and, as field 22, the start time.
fn parse_stat(text: &[u8]) -> Option<Entry> {
    /// `starttime`'s place among the fields after the command (field 22 of the line).
    const START_AFTER_COMMAND: usize = 19;
    let close = text.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(text.get(close + 1..)?).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    Some(Entry {
        parent: fields.get(1)?.parse().ok()?,
        start_ticks: fields.get(START_AFTER_COMMAND)?.parse().ok()?,
    })
}

/// brokerd as the walk needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Brokerd {
    /// Its pid.
    pub pid: u32,
    /// Its parent now (`getppid`): a sibling's parent, never a descendant.
    pub parent: u32,
    /// When it started, in clock ticks since boot.
    pub start_ticks: u64,
}

impl Brokerd {
    /// This process, its start time read once from `/proc/self/stat`.
    pub fn this_process() -> Result<Brokerd, DescentError> {
        static START_TICKS: std::sync::OnceLock<Result<u64, DescentError>> =
            std::sync::OnceLock::new();
        let pid = std::process::id();
        let start_ticks = START_TICKS
            .get_or_init(|| Procfs.entry(pid).map(|e| e.start_ticks))
            .clone()?;
        Ok(Brokerd {
            pid,
            parent: nix::unistd::getppid().as_raw().unsigned_abs(),
            start_ticks,
        })
    }

    /// Whether `peer` is known not to descend from brokerd without reading anything: brokerd
    /// itself or its parent (loopd, in the tests; a parent is alive, so its pid is its own).
    pub fn plainly_not_a_descendant(&self, peer: i32) -> bool {
        u32::try_from(peer).is_ok_and(|peer| peer == self.pid || peer == self.parent)
    }

    /// Whether process `peer` descends from brokerd (brokerd is not its own descendant). The
    /// walk up from `peer` stops, "no", at pid 1, at brokerd's parent, or at a process that
    /// started before brokerd; "yes" at a process whose parent is brokerd.
    pub fn is_ancestor_of(
        &self,
        peer: u32,
        table: &impl ProcessTable,
    ) -> Result<bool, DescentError> {
        self.is_ancestor_within(peer, table, ANCESTRY_MAX_PROCESSES)?
            .ok_or(DescentError::TooDeep(peer))
    }

    /// [`Brokerd::is_ancestor_of`] reading at most `max_processes` processes: `Ok(None)` when
    /// that was not enough to tell.
    pub fn is_ancestor_within(
        &self,
        peer: u32,
        table: &impl ProcessTable,
        max_processes: usize,
    ) -> Result<Option<bool>, DescentError> {
        let mut current = peer;
        for _ in 0..max_processes {
            if current == self.pid || current <= 1 || current == self.parent {
                return Ok(Some(false));
            }
            let entry = table.entry(current)?;
            // Strictly before: a process started in brokerd's own clock tick is walked on.
            if entry.start_ticks < self.start_ticks {
                return Ok(Some(false));
            }
            if entry.parent == self.pid {
                return Ok(Some(true));
            }
            current = entry.parent;
        }
        Ok(None)
    }
}

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
