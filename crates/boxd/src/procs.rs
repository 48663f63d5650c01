//! What boxd reads of the process table (`/proc`, through `procfs`): when a process started
//! (so a reused pid is never taken for the process boxd recorded), its process group, its
//! parents and descendants, and which process holds a listening socket.
//!
//! Everything here reads `/proc` synchronously: a handful of small files on a pseudo file
//! system, read while a child starts or at boxd's start, never on a hot path.

use procfs::net::{TcpNetEntry, TcpState};
use procfs::process::{FDTarget, Process};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};

/// The most parents walked up from a process looking for boxd's child; a longer chain is taken
/// as "not a descendant".
pub const ANCESTRY_MAX_PROCESSES: usize = 1_024;

/// What boxd reads of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Its parent's pid.
    pub ppid: i32,
    /// Its process group.
    pub pgrp: i32,
    /// When it started, in clock ticks since boot (`/proc/<pid>/stat`'s `starttime`): with the
    /// pid, it names one process for good.
    pub start_ticks: u64,
    /// Whether it has exited and waits to be reaped (a zombie holds no socket and runs nothing).
    pub zombie: bool,
}

/// Process `pid`'s [`Stat`], or `None` when it is gone (or hidden from boxd).
pub fn stat(pid: i32) -> Option<Stat> {
    let stat = Process::new(pid).and_then(|p| p.stat()).ok()?;
    Some(Stat {
        ppid: stat.ppid,
        pgrp: stat.pgrp,
        start_ticks: stat.starttime,
        zombie: stat.state == 'Z',
    })
}

/// Every live (not zombie) process boxd can see, with its [`Stat`].
fn all_live() -> Result<Vec<(i32, Stat)>, String> {
    let processes =
        procfs::process::all_processes().map_err(|e| format!("cannot list /proc: {e}"))?;
    Ok(processes
        .filter_map(|p| {
            let pid = p.ok()?.pid;
            Some((pid, stat(pid)?))
        })
        .filter(|(_, s)| !s.zombie)
        .collect())
}

/// The live processes of process group `pgrp`, with their start times.
pub fn group_members(pgrp: i32) -> Result<Vec<(i32, u64)>, String> {
    Ok(all_live()?
        .into_iter()
        .filter(|(_, s)| s.pgrp == pgrp)
        .map(|(pid, s)| (pid, s.start_ticks))
        .collect())
}

/// Whether process `pid` is `ancestor` or descends from it. A chain that cannot be read (a
/// process gone or hidden) or that goes on past [`ANCESTRY_MAX_PROCESSES`] is "no".
pub fn descends_from(pid: i32, ancestor: i32) -> bool {
    let mut current = pid;
    for _ in 0..ANCESTRY_MAX_PROCESSES {
        if current == ancestor {
            return true;
        }
        if current <= 1 {
            return false;
        }
        match stat(current) {
            Some(s) => current = s.ppid,
            None => return false,
        }
    }
    false
}

/// `root` and every live process that descends from it.
fn descendants(root: i32) -> Result<Vec<i32>, String> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for (pid, s) in all_live()? {
        children.entry(s.ppid).or_default().push(pid);
    }
    let mut found = vec![root];
    let mut i = 0;
    while let Some(&pid) = found.get(i) {
        if let Some(kids) = children.get(&pid) {
            found.extend(kids.iter().filter(|k| **k != pid));
        }
        i += 1;
    }
    Ok(found)
}

/// The inodes of the sockets that `root` and its descendants hold. `root`'s own descriptors
/// must be readable; a descendant that exits meanwhile is skipped.
fn socket_inodes(root: i32) -> Result<HashSet<u64>, String> {
    let mut inodes = HashSet::new();
    for pid in descendants(root)? {
        let fds = match Process::new(pid).and_then(|p| p.fd()) {
            Ok(fds) => fds,
            Err(e) if pid == root => return Err(format!("cannot read /proc/{pid}/fd: {e}")),
            Err(_) => continue,
        };
        for fd in fds.flatten() {
            if let FDTarget::Socket(inode) = fd.target {
                inodes.insert(inode);
            }
        }
    }
    Ok(inodes)
}

/// Whether a listening socket bound to `bound` takes connections made to `target`: the same
/// port, and the same address or the wildcard of either family (a dual-stack `[::]` socket
/// takes IPv4 connections too; whether it is `IPV6_V6ONLY` cannot be read from `/proc`).
fn takes(bound: SocketAddr, target: SocketAddr) -> bool {
    let ip = |a: IpAddr| match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    };
    bound.port() == target.port()
        && (bound.ip().is_unspecified() || ip(bound.ip()) == ip(target.ip()))
}

/// The inodes of the listening TCP sockets (in boxd's network namespace) that take connections
/// made to `target`.
fn tcp_listeners(target: SocketAddr) -> Result<BTreeSet<u64>, String> {
    let me = Process::myself().map_err(|e| format!("cannot read /proc/self: {e}"))?;
    let mut entries: Vec<TcpNetEntry> = me
        .tcp()
        .map_err(|e| format!("cannot read /proc/self/net/tcp: {e}"))?;
    // A host without IPv6 has no tcp6 table: IPv4 alone is then the whole answer.
    entries.extend(me.tcp6().unwrap_or_default());
    Ok(entries
        .into_iter()
        .filter(|e| e.state == TcpState::Listen && takes(e.local_address, target))
        .map(|e| e.inode)
        .collect())
}

/// Who holds the listening sockets that take connections to a TCP address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpOwner {
    /// Each of them is held by the process asked about or one of its descendants.
    Ours,
    /// At least one is held by another process: what boxd saw, in words.
    Theirs(String),
    /// boxd cannot tell (`/proc` unreadable, or no listening socket found): why.
    Unknown(String),
}

/// Whether the listening sockets that take connections to `target` are all held by `pid` or
/// its descendants.
pub fn tcp_owner(target: SocketAddr, pid: i32) -> TcpOwner {
    let listeners = match tcp_listeners(target) {
        Ok(l) if l.is_empty() => {
            return TcpOwner::Unknown(format!("no listening socket for {target} in /proc"));
        }
        Ok(l) => l,
        Err(e) => return TcpOwner::Unknown(e),
    };
    let held = match socket_inodes(pid) {
        Ok(held) => held,
        Err(e) => return TcpOwner::Unknown(e),
    };
    let strangers = listeners.iter().filter(|i| !held.contains(i)).count();
    if strangers == 0 {
        TcpOwner::Ours
    } else {
        TcpOwner::Theirs(format!(
            "{strangers} of the {} sockets listening for {target} are held by a process other \
             than the child (pid {pid}) and its descendants",
            listeners.len()
        ))
    }
}

#[cfg(test)]
pub(crate) mod testing {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    /// Another process, which holds no socket of the test's: a shell waiting on its stdin,
    /// killed when dropped.
    pub(crate) struct Stranger(std::process::Child);

    impl Stranger {
        pub(crate) fn start() -> Stranger {
            let child = std::process::Command::new("/bin/sh")
                .args(["-c", "read line"])
                .stdin(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            Stranger(child)
        }

        pub(crate) fn pid(&self) -> u32 {
            self.0.id()
        }
    }

    impl Drop for Stranger {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::testing::Stranger;
    use super::*;

    fn pid() -> i32 {
        i32::try_from(std::process::id()).unwrap()
    }

    #[test]
    fn a_process_descends_from_itself_and_its_parent_not_from_it() {
        let me = pid();
        assert!(descends_from(me, me));
        let parent = stat(me).unwrap().ppid;
        assert!(descends_from(me, parent));
        assert!(!descends_from(parent, me));
        assert!(!descends_from(1, me));
    }

    #[test]
    fn wildcards_and_mapped_addresses_take_connections() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(takes(a("127.0.0.1:80"), a("127.0.0.1:80")));
        assert!(takes(a("0.0.0.0:80"), a("127.0.0.1:80")));
        assert!(takes(a("[::]:80"), a("127.0.0.1:80")));
        assert!(takes(a("[::ffff:127.0.0.1]:80"), a("127.0.0.1:80")));
        assert!(!takes(a("127.0.0.1:81"), a("127.0.0.1:80")));
        assert!(!takes(a("127.0.0.2:80"), a("127.0.0.1:80")));
    }

    #[test]
    fn a_listener_of_this_process_is_ours_and_not_another_processs() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        assert_eq!(tcp_owner(addr, pid()), TcpOwner::Ours);
        let stranger = Stranger::start();
        let owner = tcp_owner(addr, i32::try_from(stranger.pid()).unwrap());
        assert!(matches!(owner, TcpOwner::Theirs(_)), "{owner:?}");
    }

    #[test]
    fn a_group_lists_its_live_members() {
        let me = stat(pid()).unwrap();
        let members = group_members(me.pgrp).unwrap();
        assert!(members.contains(&(pid(), me.start_ticks)), "{members:?}");
    }
}
