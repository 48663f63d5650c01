//! Unit tests of `pidfd`: real processes (this test binary run again as a child
//! that connects or listens) held by their pidfds, before and after they exit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Where a child connects (`child_connects`) or listens (`child_listens`).
const SOCKET_ENV: &str = "BXHTTP_PIDFD_TEST_SOCKET";
/// The line a child prints once it has connected or listens.
const READY: &str = "pidfd-child-ready";

/// This test binary run again as `test`, told `socket`; returned once it printed [`READY`].
fn child(test: &str, socket: &Path) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--ignored", "--nocapture"])
        .env(SOCKET_ENV, socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let ready = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .any(|line| line.contains(READY));
    assert!(ready, "the child {test} never got ready");
    child
}

/// Kills and reaps `child`: its pid is free to be reused from here on.
fn end(mut child: Child) -> u32 {
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    pid
}

/// Whether this kernel gives pidfds for socket peers (Linux 6.5); the tests that need one
/// say so and pass where it does not.
fn kernel_has_peer_pidfds() -> bool {
    let (a, _b) = UnixStream::pair().unwrap();
    let offered = peer_pidfd(&a, std::process::id()).unwrap().is_some();
    if !offered {
        eprintln!("skipped: this kernel has no SO_PEERPIDFD");
    }
    offered
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
    assert_eq!(same_process(42, Some(-1)), Err(PidfdError::Exited(42)));
    assert_eq!(same_process(42, Some(43)), Err(PidfdError::Reused(42)));
    assert!(matches!(
        same_process(42, None),
        Err(PidfdError::Unreadable { .. })
    ));
}

#[test]
fn a_peer_that_exited_is_refused_even_where_its_pid_names_a_live_process() {
    if !kernel_has_peer_pidfds() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let connecting = child("pidfd::tests::child_connects", &path);
    let (stream, _) = listener.accept().unwrap();
    let pid = i32::try_from(connecting.id()).unwrap();
    // Taken at accept, as the server does.
    let peer = PeerPidfd::take(&stream, Some(pid));
    assert_eq!(peer.still_holds(pid.unsigned_abs()), Ok(()));
    let pid = end(connecting);
    assert_eq!(peer.still_holds(pid), Err(PidfdError::Exited(pid)));
    // A pid reused by a live process (here: this one) does not pass for the one that
    // connected: the pidfd holds the process, not the number.
    let live = std::process::id();
    assert_eq!(peer.still_holds(live), Err(PidfdError::Exited(live)));
}

#[test]
fn a_peer_without_a_pid_cannot_pass() {
    let (a, _b) = UnixStream::pair().unwrap();
    assert_eq!(
        PeerPidfd::take(&a, None).still_holds(1),
        Err(PidfdError::NoPid)
    );
    assert_eq!(
        PeerPidfd::take(&a, Some(0)).still_holds(1),
        Err(PidfdError::NoPid)
    );
}

#[test]
fn the_process_that_listens_is_pinned_until_it_exits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.sock");
    let listening = child("pidfd::tests::child_listens", &path);
    let stream = UnixStream::connect(&path).unwrap();
    let server = Pinned::peer_of(&stream).unwrap();
    assert_eq!(server.pid(), listening.id());
    assert_eq!(server.alive(), Ok(()));
    let ancestor = server.ancestor().unwrap();
    assert_eq!(ancestor.pid, listening.id());
    assert_eq!(ancestor.parent, std::process::id());
    let pid = end(listening);
    assert_eq!(server.alive(), Err(PidfdError::Exited(pid)));
    assert_eq!(server.ancestor(), Err(PidfdError::Exited(pid)));
}

#[test]
fn without_a_pidfd_a_changed_start_time_means_another_process() {
    let me = std::process::id();
    let start = Procfs.entry(me).unwrap().start_ticks;
    let same = Pinned {
        pid: me,
        start_ticks: start,
        pidfd: None,
    };
    assert_eq!(same.alive(), Ok(()));
    let earlier = Pinned {
        pid: me,
        start_ticks: start.wrapping_sub(1),
        pidfd: None,
    };
    assert_eq!(earlier.alive(), Err(PidfdError::Reused(me)));
    assert_eq!(earlier.ancestor(), Err(PidfdError::Reused(me)));
}

/// Run as a child by the tests above: connects, says so, and waits until its stdin closes
/// (the test kills it first).
#[test]
#[ignore = "run as a child by the tests above"]
fn child_connects() {
    let path = std::env::var(SOCKET_ENV).unwrap();
    let _stream = UnixStream::connect(path).unwrap();
    println!("{READY}");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}

/// Run as a child by the tests above: listens, says so, and accepts until its stdin closes
/// (the test kills it first).
#[test]
#[ignore = "run as a child by the tests above"]
fn child_listens() {
    let path = std::env::var(SOCKET_ENV).unwrap();
    let listener = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || for _ in listener.incoming() {});
    println!("{READY}");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
