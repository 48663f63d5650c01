//! boxd with stand-in children (`boxd-test-child`): start order and readiness, readiness
//! timeouts, pinned hashes, crashes with backoff, SIGTERM order and grace, no process left,
//! and systemd's notify socket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use nix::sys::signal::Signal;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;
use support::{Setup, exists};

const RESTART: &str =
    "initial_backoff_ms = 50\nmax_backoff_ms = 200\nmax_restarts = 2\nwindow_ms = 60000";

fn position(events: &[String], line: &str) -> usize {
    events
        .iter()
        .position(|e| e == line)
        .unwrap_or_else(|| panic!("{line:?} not in {events:?}"))
}

#[test]
fn children_start_in_order_each_once_ready_and_stop_in_reverse_on_sigterm() {
    let mut s = Setup::new(RESTART);
    s.child("a", &["--ready-after-ms", "200"], "");
    s.child("b", &["--ready-after-ms", "200"], "");
    s.child("c", &[], "");
    let mut boxd = s.start(&[]);
    boxd.wait_for("c listening");
    let ev = boxd.events();
    assert!(
        position(&ev, "a listening") < position(&ev, "b start"),
        "{ev:?}"
    );
    assert!(
        position(&ev, "b listening") < position(&ev, "c start"),
        "{ev:?}"
    );
    boxd.wait_for("a start");
    support::wait_until("boxd to say all are ready", || {
        boxd.stderr().contains("all children are ready")
    });
    boxd.signal(Signal::SIGTERM);
    let status = boxd.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", boxd.stderr());
    let ev = boxd.events();
    let stops: Vec<&String> = ev.iter().filter(|e| e.ends_with(" stop")).collect();
    assert_eq!(stops, ["c stop", "b stop", "a stop"], "{ev:?}");
    assert!(boxd.stderr().contains("a says hello on stderr"));
    for pid in boxd.pids() {
        assert!(!exists(pid), "child {pid} is still there");
    }
}

#[test]
fn a_child_with_previous_starts_beside_the_one_before_and_the_next_waits_for_both() {
    let mut s = Setup::new(RESTART);
    // a is slow to be ready; b starts with it, not after it; c waits for both.
    s.child("a", &["--ready-after-ms", "3000"], "");
    s.child("b", &["--ready-after-ms", "200"], "with_previous = true");
    s.child("c", &[], "");
    let mut boxd = s.start(&[]);
    boxd.wait_for("c listening");
    let ev = boxd.events();
    assert!(
        position(&ev, "b start") < position(&ev, "a listening"),
        "{ev:?}"
    );
    assert!(
        position(&ev, "a listening") < position(&ev, "c start"),
        "{ev:?}"
    );
    assert!(
        position(&ev, "b listening") < position(&ev, "c start"),
        "{ev:?}"
    );
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
    let ev = boxd.events();
    let stops: Vec<&String> = ev.iter().filter(|e| e.ends_with(" stop")).collect();
    assert_eq!(stops, ["c stop", "b stop", "a stop"], "{ev:?}");
}

#[test]
fn a_child_started_with_the_one_before_that_is_not_ready_in_time_fails_boxd_and_stops_both() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    s.child(
        "b",
        &["--ready-after-ms", "60000"],
        "with_previous = true\nstart_timeout_ms = 300",
    );
    let mut boxd = s.start(&[]);
    assert_eq!(boxd.wait_exit().code(), Some(1));
    let err = boxd.stderr();
    assert!(err.contains("b: not ready within 300 ms"), "{err}");
    let ev = boxd.events();
    assert!(position(&ev, "b stop") < position(&ev, "a stop"), "{ev:?}");
    for pid in boxd.pids() {
        assert!(!exists(pid), "child {pid} is still there");
    }
}

#[test]
fn sighup_is_ignored_and_the_children_keep_running() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    let mut boxd = s.start(&[]);
    boxd.wait_for("a listening");
    boxd.signal(Signal::SIGHUP);
    support::wait_until("boxd to say it ignores SIGHUP", || {
        boxd.stderr().contains(boxd::daemon::SIGHUP_IGNORED)
    });
    let pids = boxd.pids();
    assert!(pids.iter().all(|pid| support::runs(*pid)), "{pids:?}");
    assert!(!boxd.events().contains(&"a stop".to_string()));
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
}

#[test]
fn sigint_stops_too() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    let mut boxd = s.start(&[]);
    boxd.wait_for("a listening");
    boxd.signal(Signal::SIGINT);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
    assert!(boxd.events().contains(&"a stop".to_string()));
}

#[test]
fn a_child_ignoring_sigterm_is_killed_after_its_grace() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    s.child("b", &["--ignore-term"], "stop_grace_ms = 300");
    let mut boxd = s.start(&[]);
    boxd.wait_for("b listening");
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
    let ev = boxd.events();
    assert!(
        position(&ev, "b ignores-term") < position(&ev, "a stop"),
        "{ev:?}"
    );
    assert!(boxd.stderr().contains("SIGKILL"), "{}", boxd.stderr());
    for pid in boxd.pids() {
        assert!(!exists(pid), "child {pid} is still there");
    }
}

#[test]
fn a_child_not_ready_in_time_fails_boxd_and_stops_the_started_ones() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    s.child(
        "b",
        &["--ready-after-ms", "60000"],
        "start_timeout_ms = 300",
    );
    s.child("c", &[], "");
    let mut boxd = s.start(&[]);
    let status = boxd.wait_exit();
    assert_eq!(status.code(), Some(1));
    let err = boxd.stderr();
    assert!(err.contains("b: not ready within 300 ms"), "{err}");
    let ev = boxd.events();
    assert!(position(&ev, "b stop") < position(&ev, "a stop"), "{ev:?}");
    assert!(!ev.iter().any(|e| e.starts_with("c ")), "{ev:?}");
    for pid in boxd.pids() {
        assert!(!exists(pid), "child {pid} is still there");
    }
}

#[test]
fn a_pinned_hash_mismatch_refuses_to_start_the_child() {
    let mut s = Setup::new(RESTART);
    let good = s.dir.path().join("a.toml");
    std::fs::write(&good, "").unwrap();
    let bad = s.dir.path().join("b.toml");
    std::fs::write(&bad, "changed").unwrap();
    let empty_sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
    let good_s = good.display().to_string();
    let bad_s = bad.display().to_string();
    s.child(
        "a",
        &["--config", &good_s],
        &format!("config_file = {good_s:?}\nconfig_sha256 = {empty_sha:?}"),
    );
    s.child(
        "b",
        &["--config", &bad_s],
        &format!("config_file = {bad_s:?}\nconfig_sha256 = {empty_sha:?}"),
    );
    let mut boxd = s.start(&[]);
    assert_eq!(boxd.wait_exit().code(), Some(1));
    let err = boxd.stderr();
    assert!(
        err.contains(&format!("config file {bad_s} does not match")),
        "{err}"
    );
    assert!(err.contains(&format!("expected {empty_sha}")), "{err}");
    let actual = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"changed"));
    assert!(err.contains(&format!("actual {actual}")), "{err}");
    assert_eq!(boxd.events(), ["a start", "a listening", "a stop"]);
}

#[test]
fn a_crashing_child_is_restarted_with_backoff_then_given_up() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    s.child("b", &["--crash-after-ms", "100"], "");
    let mut boxd = s.start(&[]);
    assert_eq!(boxd.wait_exit().code(), Some(1));
    let err = boxd.stderr();
    assert!(
        err.contains("b: died again after 2 restarts within 60000 ms"),
        "{err}"
    );
    assert!(err.contains("backoff_ms=50"), "{err}");
    assert!(err.contains("backoff_ms=100"), "{err}");
    let ev = boxd.events();
    assert_eq!(ev.iter().filter(|e| *e == "b start").count(), 3, "{ev:?}");
    assert_eq!(ev.iter().filter(|e| *e == "b crash").count(), 3, "{ev:?}");
    assert_eq!(ev.last().map(String::as_str), Some("a stop"), "{ev:?}");
    for pid in boxd.pids() {
        assert!(!exists(pid), "child {pid} is still there");
    }
}

#[test]
fn notify_socket_gets_ready_and_watchdog_and_children_do_not_see_it() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    let path = s.dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(support::WAIT_MS)))
        .unwrap();
    let path_s = path.display().to_string();
    let mut boxd = s.start(&[("NOTIFY_SOCKET", &path_s), ("WATCHDOG_USEC", "200000")]);
    let got = receive_until_ready_and_watchdog(&sock);
    assert!(got.contains(&"READY=1".to_string()), "{got:?}");
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
    let lines = boxd.lines();
    assert!(!lines.iter().any(|l| l.contains(" env ")), "{lines:?}");
}

#[test]
fn a_child_exiting_before_it_is_ready_fails_boxd() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    let sock = s.sock("never");
    s.raw(&format!(
        "[[children]]\nname = \"quitter\"\ncommand = \"/bin/sh\"\nargs = [\"-c\", \"exit 7\"]\n\
         ready = {{ socket = {sock:?} }}"
    ));
    let mut boxd = s.start(&[]);
    assert_eq!(boxd.wait_exit().code(), Some(1));
    let err = boxd.stderr();
    assert!(err.contains("quitter: exited before it was ready"), "{err}");
    assert!(err.contains("exit status: 7"), "{err}");
    assert_eq!(boxd.events(), ["a start", "a listening", "a stop"]);
}

#[test]
fn a_child_ready_by_running_time_is_ready_once_it_ran_that_long_and_not_if_it_exits() {
    let mut s = Setup::new(RESTART);
    s.raw(
        "[[children]]\nname = \"client\"\ncommand = \"/bin/sh\"\n\
         args = [\"-c\", \"exec sleep 60\"]\nready = { running_ms = 200 }\n",
    );
    let mut boxd = s.start(&[]);
    support::wait_until("boxd to say all are ready", || {
        boxd.stderr().contains("all children are ready")
    });
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());

    let mut s = Setup::new(RESTART);
    s.raw(
        "[[children]]\nname = \"quitter\"\ncommand = \"/bin/sh\"\n\
         args = [\"-c\", \"exit 3\"]\nready = { running_ms = 2000 }\n",
    );
    let mut boxd = s.start(&[]);
    assert_eq!(boxd.wait_exit().code(), Some(1));
    let err = boxd.stderr();
    assert!(err.contains("quitter: exited before it was ready"), "{err}");
}

#[test]
fn a_child_that_cannot_be_started_fails_boxd_naming_it() {
    let mut s = Setup::new(RESTART);
    let sock = s.sock("never");
    s.raw(&format!(
        "[[children]]\nname = \"ghost\"\ncommand = \"/nonexistent/ghost\"\n\
         ready = {{ socket = {sock:?} }}"
    ));
    let mut boxd = s.start(&[]);
    assert_eq!(boxd.wait_exit().code(), Some(1));
    let err = boxd.stderr();
    assert!(
        err.contains(
            "ghost: cannot start /nonexistent/ghost: no executable file at /nonexistent/ghost"
        ),
        "{err}"
    );
}

#[test]
fn a_program_named_without_a_path_is_found_in_the_childs_path() {
    let mut s = Setup::new(RESTART);
    let sock = s.sock("a");
    let dir = std::path::Path::new(support::CHILD).parent().unwrap();
    let log = s.log.display().to_string();
    s.raw(&format!(
        "[[children]]\nname = \"a\"\ncommand = \"boxd-test-child\"\n\
         args = [\"a\", {log:?}, \"--socket\", {sock:?}]\nenv = {{ PATH = {dir:?} }}\n\
         ready = {{ socket = {sock:?} }}"
    ));
    let mut boxd = s.start(&[]);
    boxd.wait_for("a listening");
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
}

/// Receives datagrams until both READY=1 and WATCHDOG=1 came; returns them all.
fn receive_until_ready_and_watchdog(sock: &UnixDatagram) -> Vec<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while !(got.iter().any(|m| m == "READY=1") && got.iter().any(|m| m == "WATCHDOG=1")) {
        let n = sock.recv(&mut buf).unwrap();
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    got
}

#[test]
fn an_abstract_notify_socket_gets_ready() {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::SocketAddr;
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    let name = format!(
        "boxd-test-{}-{:?}",
        std::process::id(),
        std::time::Instant::now()
    );
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let sock = UnixDatagram::bind_addr(&addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(support::WAIT_MS)))
        .unwrap();
    let target = format!("@{name}");
    let mut boxd = s.start(&[("NOTIFY_SOCKET", &target), ("WATCHDOG_USEC", "200000")]);
    let got = receive_until_ready_and_watchdog(&sock);
    assert!(got.contains(&"READY=1".to_string()), "{got:?}");
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
}
