//! Unit tests of the ancestry walk (`descent`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// A process table of `(pid, parent, start)`; it remembers which pids were read.
struct Fake {
    entries: BTreeMap<u32, Entry>,
    read: RefCell<Vec<u32>>,
}

impl Fake {
    fn new(rows: &[(u32, u32, u64)]) -> Fake {
        Fake {
            entries: rows
                .iter()
                .map(|&(pid, parent, start_ticks)| {
                    (
                        pid,
                        Entry {
                            parent,
                            start_ticks,
                        },
                    )
                })
                .collect(),
            read: RefCell::new(Vec::new()),
        }
    }
}

impl ProcessTable for Fake {
    fn entry(&self, pid: u32) -> Result<Entry, DescentError> {
        self.read.borrow_mut().push(pid);
        self.entries
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
/// When brokerd started, in ticks.
const BROKERD_START: u64 = 1_000;

const ME: Brokerd = Brokerd {
    pid: BROKERD,
    parent: BOXD,
    start_ticks: BROKERD_START,
};

/// init → boxd → {brokerd → mcp → shell, loopd}; brokerd also adopted an orphan.
fn tree() -> Fake {
    Fake::new(&[
        (INIT, 0, 0),
        (BOXD, INIT, 900),
        (BROKERD, BOXD, BROKERD_START),
        (LOOPD, BOXD, 1_100),
        (MCP, BROKERD, 1_050),
        (SHELL, MCP, 1_200),
        (ORPHAN, BROKERD, 1_300),
    ])
}

#[test]
fn descent_children_grandchildren_and_adopted_orphans_are_descendants() {
    let table = tree();
    for pid in [MCP, SHELL, ORPHAN] {
        assert_eq!(ME.is_ancestor_of(pid, &table), Ok(true), "pid {pid}");
    }
}

#[test]
fn descent_brokerd_itself_its_siblings_and_ancestors_are_not() {
    let table = tree();
    for pid in [BROKERD, LOOPD, BOXD, INIT] {
        assert_eq!(ME.is_ancestor_of(pid, &table), Ok(false), "pid {pid}");
    }
}

#[test]
fn descent_stops_at_brokerds_parent_without_reading_it() {
    // loopd → boxd: boxd is brokerd's parent, so boxd (perhaps hidden) is never read.
    let table = Fake::new(&[(LOOPD, BOXD, 1_100)]);
    assert_eq!(ME.is_ancestor_of(LOOPD, &table), Ok(false));
    assert_eq!(*table.read.borrow(), [LOOPD]);
}

#[test]
fn descent_stops_at_a_process_older_than_brokerd() {
    // An unrelated tree: its root started before brokerd, so nothing above it is read.
    let table = Fake::new(&[(800, 801, 1_500), (801, 802, 10), (802, INIT, 5)]);
    assert_eq!(ME.is_ancestor_of(800, &table), Ok(false));
    assert_eq!(*table.read.borrow(), [800, 801]);
    // Started in brokerd's own tick: walked on, not trusted.
    let table = Fake::new(&[(800, BROKERD, BROKERD_START)]);
    assert_eq!(ME.is_ancestor_of(800, &table), Ok(true));
}

#[test]
fn descent_a_gone_process_in_the_chain_is_an_error() {
    let table = Fake::new(&[(SHELL, MCP, 1_200)]);
    assert_eq!(
        ME.is_ancestor_of(SHELL, &table),
        Err(DescentError::Gone(MCP))
    );
}

#[test]
fn descent_a_walk_cut_short_says_it_could_not_tell() {
    let table = tree();
    assert_eq!(ME.is_ancestor_within(SHELL, &table, 1), Ok(None));
    assert_eq!(ME.is_ancestor_within(SHELL, &table, 2), Ok(Some(true)));
}

#[test]
fn descent_a_cycle_of_reused_pids_ends_too_deep() {
    let table = Fake::new(&[(700, 701, 2_000), (701, 700, 2_000)]);
    assert_eq!(
        ME.is_ancestor_of(700, &table),
        Err(DescentError::TooDeep(700))
    );
}

#[test]
fn the_stat_line_is_read_after_the_last_parenthesis() {
    let line = b"4242 (a) b (c) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0                      123456 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
    assert_eq!(
        parse_stat(line),
        Some(Entry {
            parent: 17,
            start_ticks: 123_456
        })
    );
    assert_eq!(parse_stat(b"4242 (no close"), None);
    assert_eq!(parse_stat(b"4242 (x) S 17"), None);
}

#[test]
fn procfs_sees_a_real_child_as_a_descendant_and_the_parent_not() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let me = Brokerd::this_process().unwrap();
    assert_eq!(me.parent, std::os::unix::process::parent_id());
    assert_eq!(me.is_ancestor_of(child.id(), &Procfs), Ok(true));
    assert_eq!(me.is_ancestor_of(me.parent, &Procfs), Ok(false));
    let why = check(Some(child.id() as i32), me, None, ANCESTRY_MAX_PROCESSES)
        .unwrap()
        .unwrap_err();
    assert!(why.contains("descendant"), "{why}");
    child.kill().unwrap();
    child.wait().unwrap();
    let why = check(Some(child.id() as i32), me, None, ANCESTRY_MAX_PROCESSES)
        .unwrap()
        .unwrap_err();
    assert!(why.contains("gone"), "{why}");
}

#[test]
fn check_refuses_a_peer_without_a_pid_or_outside_the_namespace() {
    let me = Brokerd::this_process().unwrap();
    assert!(
        check(None, me, None, 1)
            .unwrap()
            .unwrap_err()
            .contains("pid")
    );
    assert!(
        check(Some(0), me, None, 1)
            .unwrap()
            .unwrap_err()
            .contains("namespace")
    );
    assert!(
        check(Some(-5), me, None, 1)
            .unwrap()
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
    let me = Brokerd::this_process().unwrap();
    // Kernels before 6.5 have no SO_PEERPIDFD: then there is nothing more to check.
    let Some(fd) = peer_pidfd(&server).unwrap() else {
        return;
    };
    let fdinfo = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()));
    assert_eq!(pidfd_pid_in(&fdinfo.unwrap()), Some(i64::from(me.pid)));
    assert_eq!(check(Some(me.pid as i32), me, Some(&fd), 1), Some(Ok(())));
}
