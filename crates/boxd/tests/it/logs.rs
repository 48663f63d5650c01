//! What boxd logs of its children's lines: each at the level the child logged it (a daemon's
//! line carries its level, `bxconfig::split_log_line`), so that under systemd `journalctl -p
//! err` shows a child's errors; and when boxd logs to journald (`JOURNAL_STREAM` names its own
//! stderr only).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::{self, Setup};
use nix::sys::signal::Signal;
use tracing::Level;

const RESTART: &str =
    "initial_backoff_ms = 50\nmax_backoff_ms = 200\nmax_restarts = 2\nwindow_ms = 60000";

/// The level and the text after it of the first line of `log` (boxd's stderr) that has `words`.
fn logged<'a>(log: &'a str, words: &str) -> (Level, &'a str) {
    let line = log
        .lines()
        .find(|l| l.contains(words))
        .unwrap_or_else(|| panic!("{words:?} not in {log}"));
    bxconfig::split_log_line(line).unwrap_or_else(|| panic!("no level in {line:?}"))
}

#[test]
fn a_childs_error_and_warning_lines_keep_their_level() {
    let mut s = Setup::new(RESTART);
    s.child("a", &[], "");
    let mut boxd = s.start(&[]);
    // The child logs its error and its warning before this line, on the same stderr.
    support::wait_until("boxd to log the child's hello", || {
        boxd.stderr().contains("a says hello on stderr")
    });
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
    let log = boxd.stderr();
    let (level, text) = logged(&log, "a fails on purpose");
    assert_eq!(level, Level::ERROR, "{log}");
    // Once: the child's own time and level are left out of the text boxd logs.
    assert!(
        text.starts_with("boxd::child: boxd_test_child: a fails on purpose"),
        "{text}"
    );
    assert!(text.contains("child=a"), "{text}");
    assert_eq!(logged(&log, "a warns on purpose").0, Level::WARN, "{log}");
    // A line without a level (not a daemon's log line) is logged at INFO, whole.
    let (level, text) = logged(&log, "a says hello on stderr");
    assert_eq!(level, Level::INFO, "{log}");
    assert!(
        text.starts_with("boxd::child: a says hello on stderr"),
        "{text}"
    );
}
