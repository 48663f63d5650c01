//! Unit tests of `servers`: running `sleep`s pinned by their start time, before and after
//! they exit.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::ancestry::{ProcessTable, Procfs};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Kills and reaps `child`.
fn end(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A running `sleep`, pinned without a pidfd (its start time), and the child to end.
fn pinned_sleep() -> (Pinned, Child) {
    let child = Command::new("sleep")
        .arg("600")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pinned = Pinned {
        pid: child.id(),
        start_ticks: Procfs.entry(child.id()).unwrap().start_ticks,
        pidfd: None,
    };
    (pinned, child)
}

#[test]
fn each_running_process_is_kept_once_and_forgotten_once_it_exits() {
    let servers = Servers::default();
    let here = Path::new("/test.sock");
    assert_eq!(servers.running().unwrap_err(), ServersError::NoneRunning);
    let (a, a_child) = pinned_sleep();
    let (b, b_child) = pinned_sleep();
    let a_again = Pinned {
        pid: a.pid,
        start_ticks: a.start_ticks,
        pidfd: None,
    };
    servers.note(Ok(a), here);
    servers.note(Ok(a_again), here);
    servers.note(Err(PidfdError::NoPid), here);
    assert_eq!(servers.running().unwrap().len(), 1);
    // A second process taking the path over is added; it does not replace the first.
    servers.note(Ok(b), here);
    let pids = |s: &Servers| -> Vec<u32> { s.running().unwrap().iter().map(|p| p.pid()).collect() };
    assert_eq!(pids(&servers), [a_child.id(), b_child.id()]);
    let b_pid = b_child.id();
    end(a_child);
    assert_eq!(pids(&servers), [b_pid]);
    end(b_child);
    assert_eq!(servers.running().unwrap_err(), ServersError::NoneRunning);
}

#[test]
fn past_the_limit_nothing_can_be_told() {
    let servers = Servers::default();
    let here = Path::new("/test.sock");
    let mut children = Vec::new();
    for _ in 0..=MAX_SERVER_PROCESSES {
        let (pinned, child) = pinned_sleep();
        servers.note(Ok(pinned), here);
        children.push(child);
    }
    assert_eq!(servers.running().unwrap_err(), ServersError::Overflowed);
    for child in children {
        end(child);
    }
    // Still: the one left out may have been brokerd, and nothing says which it was.
    assert_eq!(servers.running().unwrap_err(), ServersError::Overflowed);
}
