//! The tests' check of an exposition with the real thing: `promtool check metrics` (Debian's
//! `prometheus` package), from `$PROMTOOL` or the `PATH`. Without it the check is skipped with
//! the reason printed, unless `BOXMAKER_REQUIRE_PROMETHEUS=1`, which makes a missing promtool
//! a failure. (A local helper: `bxmetrics` has no testing module on this branch.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::Write;
use std::process::{Command, Stdio};

/// Checks `classic` (the classic text format, what promtool reads) with `promtool check
/// metrics`; panics with promtool's words when it finds a problem.
pub fn check(classic: &str) {
    let promtool = std::env::var_os("PROMTOOL").unwrap_or_else(|| "promtool".into());
    let spawned = Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let required = std::env::var("BOXMAKER_REQUIRE_PROMETHEUS").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "BOXMAKER_REQUIRE_PROMETHEUS=1 but {promtool:?} cannot run: {e}"
            );
            eprintln!("skipped: promtool check metrics ({promtool:?} cannot run: {e})");
            return;
        }
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(classic.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}\n{}{}\n--- the text ---\n{classic}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
}
