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
//! The walk stops, "not a descendant", at pid 1, or at one of brokerd's own ancestors (loopd's
//! parent is boxd, which is brokerd's parent too), so it never needs to read processes that
//! `ProtectProc=invisible` hides. Anything it cannot decide is refused (fail closed): a peer
//! whose pid the kernel does not give, one outside brokerd's pid namespace (pid 0), a process
//! in the chain that is gone or hidden, a chain longer than [`ANCESTRY_MAX_PROCESSES`].
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

/// Where parents are looked up: `/proc` ([`Procfs`]), or a fake one in tests.
pub trait ProcessTable {
    /// The parent of process `pid`: 0 for pid 1, or for a process whose parent lies outside
    /// brokerd's pid namespace.
    fn parent(&self, pid: u32) -> Result<u32, DescentError>;
}

/// The real process table, read from `/proc`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Procfs;

impl ProcessTable for Procfs {
    fn parent(&self, pid: u32) -> Result<u32, DescentError> {
        let unreadable = |e: procfs::ProcError| match e {
            procfs::ProcError::NotFound(_) => DescentError::Gone(pid),
            other => DescentError::Unreadable {
                pid,
                detail: other.to_string(),
            },
        };
        let raw = i32::try_from(pid).map_err(|_| DescentError::Gone(pid))?;
        let stat = procfs::process::Process::new(raw)
            .and_then(|p| p.stat())
            .map_err(unreadable)?;
        u32::try_from(stat.ppid).map_err(|_| DescentError::Unreadable {
            pid,
            detail: format!("negative parent pid {}", stat.ppid),
        })
    }
}

/// A process and its ancestors (parent first, as far as they can be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    /// The process.
    pub pid: u32,
    /// Its parent, grandparent, ...; stops before pid 0 or at the first it cannot read.
    pub ancestors: Vec<u32>,
}

impl Lineage {
    /// `pid`'s lineage as `table` tells it.
    pub fn of(pid: u32, table: &impl ProcessTable) -> Lineage {
        let mut ancestors = Vec::new();
        let mut current = pid;
        while current > 1 && ancestors.len() < ANCESTRY_MAX_PROCESSES {
            match table.parent(current) {
                Ok(parent) if parent > 0 => {
                    ancestors.push(parent);
                    current = parent;
                }
                // Init, or outside our view: what we have is all brokerd can use.
                Ok(_) | Err(_) => break,
            }
        }
        Lineage { pid, ancestors }
    }

    /// Whether process `peer` descends from this one (a process is not its own descendant).
    /// The walk up from `peer` stops, "no", at pid 1 or at any of this process's ancestors.
    pub fn is_ancestor_of(
        &self,
        peer: u32,
        table: &impl ProcessTable,
    ) -> Result<bool, DescentError> {
        let mut current = peer;
        for _ in 0..ANCESTRY_MAX_PROCESSES {
            if current == self.pid || current <= 1 || self.ancestors.contains(&current) {
                return Ok(false);
            }
            let parent = table.parent(current)?;
            if parent == self.pid {
                return Ok(true);
            }
            current = parent;
        }
        Err(DescentError::TooDeep(peer))
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

/// Checks the peer process `pid` (with its `pidfd`, where the kernel gave one) for a brokerd
/// of pid `own_pid`; the error says why it is refused. Reads `/proc`: call off the async
/// workers.
pub(super) fn check(pid: Option<i32>, own_pid: u32, pidfd: Option<OwnedFd>) -> Result<(), String> {
    let pid = match pid.map(u32::try_from) {
        Some(Ok(pid)) if pid > 0 => pid,
        Some(_) => {
            return Err(String::from(
                "the peer is outside brokerd's pid namespace, so brokerd cannot tell whether \
                 it is one of its own MCP servers",
            ));
        }
        None => return Err(String::from("the kernel did not give the peer's pid")),
    };
    let me = Lineage::of(own_pid, &Procfs);
    let verdict = me.is_ancestor_of(pid, &Procfs);
    // Only now, after the walk: if the process that connected still holds `pid`, the walk read
    // that process, not a later one given the same number.
    if let Some(fd) = pidfd {
        let path = format!("/proc/self/fdinfo/{}", fd.as_raw_fd());
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {path} for the peer's pidfd: {e}"))?;
        same_process(pid, pidfd_pid_in(&text))?;
    }
    match verdict {
        Ok(false) => Ok(()),
        Ok(true) => Err(format!(
            "process {pid} is brokerd's own descendant (an MCP server, or something one \
             started); they may not call brokerd"
        )),
        Err(e) => Err(format!(
            "cannot tell whether process {pid} is brokerd's own descendant: {e}"
        )),
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
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    /// A process table of `(pid, parent)` pairs; it remembers which pids were read.
    struct Fake {
        parents: BTreeMap<u32, u32>,
        read: RefCell<Vec<u32>>,
    }

    impl Fake {
        fn new(pairs: &[(u32, u32)]) -> Fake {
            Fake {
                parents: pairs.iter().copied().collect(),
                read: RefCell::new(Vec::new()),
            }
        }
    }

    impl ProcessTable for Fake {
        fn parent(&self, pid: u32) -> Result<u32, DescentError> {
            self.read.borrow_mut().push(pid);
            self.parents
                .get(&pid)
                .copied()
                .ok_or(DescentError::Gone(pid))
        }
    }

    const INIT: u32 = 1;
    const BOXD: u32 = 100;
    const BROKERD: u32 = 200;
    const LOOPD: u32 = 300;
    const MCP: u32 = 400;
    const SHELL: u32 = 500;
    const ORPHAN: u32 = 600;

    /// init → boxd → {brokerd → mcp → shell, loopd}; brokerd also adopted an orphan.
    fn tree() -> Fake {
        Fake::new(&[
            (BOXD, INIT),
            (BROKERD, BOXD),
            (LOOPD, BOXD),
            (MCP, BROKERD),
            (SHELL, MCP),
            (ORPHAN, BROKERD),
            (INIT, 0),
        ])
    }

    #[test]
    fn lineage_lists_the_parents_up_to_init() {
        let me = Lineage::of(BROKERD, &tree());
        assert_eq!(me.ancestors, [BOXD, INIT]);
    }

    #[test]
    fn lineage_stops_at_the_first_unreadable_parent() {
        // boxd hidden (another user, ProtectProc=invisible): what could be read is kept.
        let table = Fake::new(&[(BROKERD, BOXD)]);
        assert_eq!(Lineage::of(BROKERD, &table).ancestors, [BOXD]);
    }

    #[test]
    fn descent_children_grandchildren_and_adopted_orphans_are_descendants() {
        let table = tree();
        let me = Lineage::of(BROKERD, &table);
        for pid in [MCP, SHELL, ORPHAN] {
            assert_eq!(me.is_ancestor_of(pid, &table), Ok(true), "pid {pid}");
        }
    }

    #[test]
    fn descent_brokerd_itself_its_siblings_and_ancestors_are_not() {
        let table = tree();
        let me = Lineage::of(BROKERD, &table);
        for pid in [BROKERD, LOOPD, BOXD, INIT] {
            assert_eq!(me.is_ancestor_of(pid, &table), Ok(false), "pid {pid}");
        }
    }

    #[test]
    fn descent_stops_at_brokerds_ancestors_without_reading_them() {
        // loopd → boxd: boxd is brokerd's parent, so its own parent (perhaps hidden) is never
        // read.
        let table = Fake::new(&[(LOOPD, BOXD)]);
        let me = Lineage {
            pid: BROKERD,
            ancestors: vec![BOXD],
        };
        assert_eq!(me.is_ancestor_of(LOOPD, &table), Ok(false));
        assert_eq!(*table.read.borrow(), [LOOPD]);
    }

    #[test]
    fn descent_a_gone_process_in_the_chain_is_an_error() {
        let table = Fake::new(&[(SHELL, MCP)]);
        let me = Lineage {
            pid: BROKERD,
            ancestors: vec![BOXD, INIT],
        };
        assert_eq!(
            me.is_ancestor_of(SHELL, &table),
            Err(DescentError::Gone(MCP))
        );
    }

    #[test]
    fn descent_a_cycle_of_reused_pids_ends_too_deep() {
        let table = Fake::new(&[(700, 701), (701, 700)]);
        let me = Lineage {
            pid: BROKERD,
            ancestors: vec![BOXD, INIT],
        };
        assert_eq!(
            me.is_ancestor_of(700, &table),
            Err(DescentError::TooDeep(700))
        );
    }

    #[test]
    fn descent_an_unrelated_process_is_not_a_descendant() {
        let table = Fake::new(&[(800, 801), (801, INIT)]);
        let me = Lineage {
            pid: BROKERD,
            ancestors: vec![BOXD, INIT],
        };
        assert_eq!(me.is_ancestor_of(800, &table), Ok(false));
    }

    #[test]
    fn procfs_sees_a_real_child_as_a_descendant_and_the_parent_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let me = Lineage::of(std::process::id(), &Procfs);
        assert_eq!(
            me.ancestors.first(),
            Some(&std::os::unix::process::parent_id())
        );
        assert_eq!(me.is_ancestor_of(child.id(), &Procfs), Ok(true));
        let parent = std::os::unix::process::parent_id();
        assert_eq!(me.is_ancestor_of(parent, &Procfs), Ok(false));
        let why = check(Some(child.id() as i32), std::process::id(), None).unwrap_err();
        assert!(why.contains("descendant"), "{why}");
        child.kill().unwrap();
        child.wait().unwrap();
        let why = check(Some(child.id() as i32), std::process::id(), None).unwrap_err();
        assert!(why.contains("gone"), "{why}");
    }

    #[test]
    fn check_refuses_a_peer_without_a_pid_or_outside_the_namespace() {
        let own = std::process::id();
        assert!(check(None, own, None).unwrap_err().contains("pid"));
        assert!(check(Some(0), own, None).unwrap_err().contains("namespace"));
        assert!(
            check(Some(-5), own, None)
                .unwrap_err()
                .contains("namespace")
        );
    }

    #[test]
    fn pidfd_pid_is_read_from_fdinfo() {
        let text = "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1234\nPid:\t4242\nNSpid:\t4242\n";
        assert_eq!(pidfd_pid_in(text), Some(4242));
        assert_eq!(pidfd_pid_in("Pid:\t-1\n"), Some(-1));
        assert_eq!(pidfd_pid_in("pos:\t0\n"), None);
    }

    #[test]
    fn a_pidfd_that_no_longer_holds_the_pid_is_refused() {
        assert_eq!(same_process(42, Some(42)), Ok(()));
        assert!(same_process(42, Some(-1)).unwrap_err().contains("exited"));
        assert!(same_process(42, Some(43)).is_err());
        assert!(same_process(42, None).is_err());
    }

    #[test]
    fn a_real_peer_pidfd_names_the_connecting_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let _client = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let (server, _) = listener.accept().unwrap();
        let own = std::process::id();
        // Kernels before 6.5 have no SO_PEERPIDFD: then there is nothing more to check.
        let Some(fd) = peer_pidfd(&server).unwrap() else {
            return;
        };
        let fdinfo = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()));
        assert_eq!(pidfd_pid_in(&fdinfo.unwrap()), Some(i64::from(own)));
        assert_eq!(check(Some(own as i32), own, Some(fd)), Ok(()));
    }
}
