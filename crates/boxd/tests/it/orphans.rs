//! boxd killed outright, and what it leaves: its children die with it (the parent-death
//! signal), what they leave in their process groups is killed at the next start (the record in
//! the runtime dir) and when a child stops, a second boxd does not take over a running one's
//! runtime dir, and a socket served by another process is not taken for a child's readiness.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use nix::sys::signal::Signal;
use support::{KillOnDrop, Setup, runs, wait_until};

const RESTART: &str =
    "initial_backoff_ms = 50\nmax_backoff_ms = 200\nmax_restarts = 2\nwindow_ms = 60000";

fn position(events: &[String], line: &str) -> usize {
    events
        .iter()
        .position(|e| e == line)
        .unwrap_or_else(|| panic!("{line:?} not in {events:?}"))
}

/// Whether the record of children in `s`'s runtime dir names `pid`.
fn recorded(s: &Setup, pid: i32) -> bool {
    let record = s.dir.path().join("run").join(boxd::leftovers::RECORD_FILE);
    std::fs::read_to_string(record).is_ok_and(|text| text.contains(&format!("\"pid\":{pid},")))
}

#[test]
fn children_die_when_boxd_is_killed() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    s.child("b", &["--ignore-term"], "");
    let mut boxd = s.start(&[]);
    boxd.wait_for("b listening");
    let pids = boxd.pids();
    let _guard = KillOnDrop(pids.clone());
    assert_eq!(pids.len(), 2, "{:?}", boxd.lines());
    boxd.signal(Signal::SIGKILL);
    boxd.wait_exit();
    for pid in pids {
        wait_until(&format!("child {pid} to die with boxd"), || !runs(pid));
    }
}

#[test]
fn what_a_killed_boxd_left_is_killed_before_the_next_one_starts_its_children() {
    let mut s = Setup::new(RESTART);
    s.child_with_grandchild("a", &[]);
    let mut first = s.start(&[]);
    first.wait_for("a listening");
    first.wait_for("a-grandchild start");
    let child = first.pids_of("a start")[0];
    let grandchild = first.pids_of("a-grandchild start")[0];
    let _guard = KillOnDrop(vec![child, grandchild]);
    // boxd records a child just after it spawns it, while the child runs on: on a loaded
    // machine the child (and its grandchild) can log before the record is written. Killed
    // before that, boxd leaves no record, and no later boxd could find the grandchild.
    wait_until("the first boxd to record the child", || recorded(&s, child));
    first.signal(Signal::SIGKILL);
    first.wait_exit();
    wait_until("the child to die with boxd", || !runs(child));
    // The grandchild has no parent-death signal: only the record finds it.
    assert!(runs(grandchild), "the grandchild died with its parent");

    let mut second = s.start(&[]);
    wait_until("the leftover grandchild to be killed", || !runs(grandchild));
    wait_until("the second a to listen", || {
        second.pids_of("a listening").len() == 2
    });
    // boxd logs a start after its spawn returns; the child may listen before that line is
    // written.
    wait_until("the second boxd to log the start of a", || {
        second.stderr().contains("started child=a")
    });
    let err = second.stderr();
    let killed = err
        .find("killed a leftover")
        .unwrap_or_else(|| panic!("no leftover killed: {err}"));
    let started = err.find("started child=a").unwrap();
    assert!(killed < started, "{err}");
    assert!(err.contains(&format!("pid={child}")), "{err}");
    second.signal(Signal::SIGTERM);
    assert_eq!(second.wait_exit().code(), Some(0), "{}", second.stderr());
}

#[test]
fn what_a_child_leaves_in_its_process_group_is_killed_when_it_stops() {
    let mut s = Setup::new(RESTART);
    s.child_with_grandchild("a", &[]);
    let mut boxd = s.start(&[]);
    boxd.wait_for("a listening");
    boxd.wait_for("a-grandchild start");
    let grandchild = boxd.pids_of("a-grandchild start")[0];
    let _guard = KillOnDrop(vec![grandchild]);
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
    wait_until("the grandchild to be killed", || !runs(grandchild));
}

#[test]
fn a_socket_served_by_another_process_is_not_taken_for_ready() {
    let mut s = Setup::new(RESTART);
    let sock = s.sock("a");
    let _stranger = s.stranger("stranger", &sock);
    s.child("a", &["--ready-after-ms", "300"], "");
    s.child("b", &[], "");
    let mut boxd = s.start(&[]);
    boxd.wait_for("b listening");
    let ev = boxd.events();
    assert!(
        position(&ev, "a listening") < position(&ev, "b start"),
        "{ev:?}"
    );
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
}

#[test]
fn a_child_whose_socket_another_process_serves_is_not_ready_and_the_error_names_it() {
    let mut s = Setup::new(RESTART);
    let sock = s.sock("a");
    let stranger = s.stranger("stranger", &sock);
    s.child(
        "a",
        &["--ready-after-ms", "60000"],
        "start_timeout_ms = 500",
    );
    let mut boxd = s.start(&[]);
    assert_eq!(boxd.wait_exit().code(), Some(1), "{}", boxd.stderr());
    let err = boxd.stderr();
    assert!(err.contains("a: not ready within 500 ms"), "{err}");
    assert!(
        err.contains(&format!(
            "served by pid {}, not by the child",
            stranger.pid()
        )),
        "{err}"
    );
    assert!(
        runs(stranger.pid()),
        "boxd must not touch a process it did not start"
    );
}

#[test]
fn a_second_boxd_on_the_same_runtime_dir_refuses_to_start() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    let mut first = s.start(&[]);
    first.wait_for("a listening");
    let child = first.pids_of("a start")[0];
    let mut second = s.start_logging_to("second.stderr", &[]);
    assert_eq!(second.wait_exit().code(), Some(1), "{}", second.stderr());
    let err = second.stderr();
    assert!(err.contains("another boxd"), "{err}");
    assert!(runs(child), "the second boxd killed the first one's child");
    assert_eq!(first.pids_of("a start"), [child]);
    first.signal(Signal::SIGTERM);
    assert_eq!(first.wait_exit().code(), Some(0), "{}", first.stderr());
}
