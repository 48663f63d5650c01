//! The orphan reaper: it reaps zombie children brokerd did not spawn, and never one it did
//! (those are tokio's, or here the test's, to wait for: stealing their exit status would make
//! that wait fail). Every child in this file is a direct child of the test process.
//!
//! `reap_adopted` reaps every zombie child of its process that it was not told of, so the
//! reaper tests run each in a process of its own (rusty-fork): in this binary's process, other
//! tests wait for children of their own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use brokerd::reaper::{reap_adopted, spawn_registered};
use rusty_fork::rusty_fork_test;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long a test waits for a child to exit, in milliseconds.
const WAIT_MS: u64 = 10_000;
/// How often it looks again meanwhile, in milliseconds.
const POLL_MS: u64 = 10;

/// The state letter of process `pid` (`Z` for a zombie), or `None` once it is gone (reaped).
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}

/// Waits until process `pid` has exited (a zombie, or already reaped), at most [`WAIT_MS`].
fn wait_for_exit(pid: u32) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while state(pid).is_some_and(|s| s != 'Z') {
        assert!(
            Instant::now() < deadline,
            "{pid} is {:?}, not exited",
            state(pid)
        );
        std::thread::sleep(Duration::from_millis(POLL_MS));
    }
}

rusty_fork_test! {
    #[test]
    fn reaper_leaves_the_sandboxs_bubblewrap_to_its_run() {
        // exec's bubblewrap is a child brokerd waits for itself: started through the
        // registered spawner, a zombie of it is not the reaper's (with `Spawner::plain()` the
        // reaper takes it and the wait fails with ECHILD, as brokerd's probe did).
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let spawner = brokerd::builtin::exec::registered_spawner();
            let mut child = spawner.spawn(&mut tokio::process::Command::new("true")).unwrap();
            let pid = child.id().unwrap();
            wait_for_exit(pid);
            assert!(!reap_adopted().contains(&pid));
            assert!(child.wait().await.unwrap().success());
        });
    }

    #[test]
    fn reaper_reaps_a_zombie_child_it_did_not_spawn() {
        let child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        // A zombie once it exits: in this test's own process nothing else reaps it.
        wait_for_exit(pid);
        reap_adopted();
        assert_eq!(state(pid), None, "the zombie {pid} is still there");
        drop(child);
    }

    #[test]
    fn reaper_leaves_registered_children_to_their_owner() {
        let mut child = spawn_registered(
            || Command::new("sh").args(["-c", "exit 7"]).spawn(),
            |c| Some(c.id()),
        )
        .unwrap();
        wait_for_exit(child.id());
        assert!(!reap_adopted().contains(&child.id()));
        assert_eq!(state(child.id()), Some('Z'));
        assert_eq!(
            child.wait().unwrap().code(),
            Some(7),
            "the exit status was stolen"
        );
    }
}

/// The reaper's tests share this binary with tests that wait for children of their own: run
/// here, they must not take those children's exit statuses.
#[test]
fn the_reaper_tests_leave_the_other_tests_children_alone() {
    let mut child = Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
    wait_for_exit(child.id());
    reaper_reaps_a_zombie_child_it_did_not_spawn();
    reaper_leaves_registered_children_to_their_owner();
    assert_eq!(
        child.wait().unwrap().code(),
        Some(3),
        "a reaper test took another test's child"
    );
}
