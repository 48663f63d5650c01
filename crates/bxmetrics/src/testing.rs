//! For the daemons' tests: `promtool check metrics` on a daemon's real output.
//!
//! Each daemon's tests check what its `/metrics` serves with Prometheus' own linter, the one
//! in Debian's `prometheus` package. [`promtool_or_skip`] finds it (`$PROMTOOL`, else
//! `promtool` on `PATH`); where it is missing a test says why and passes, unless
//! `BOXMAKER_REQUIRE_PROMETHEUS=1` (for the full test command, where Prometheus is
//! installed), where it fails: the same rule as `BOXMAKER_REQUIRE_BWRAP` for the sandbox.
//! Here rather than in each daemon's tests so that brokerd, boxd and loopd share one helper
//! without depending on each other.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The environment variable that names the `promtool` binary to use.
pub const PROMTOOL_ENV: &str = "PROMTOOL";

/// The environment variable that, set to `1`, makes a missing `promtool` fail the test.
pub const REQUIRE_ENV: &str = "BOXMAKER_REQUIRE_PROMETHEUS";

/// `promtool`: `$PROMTOOL` when set and not empty, else `promtool` on `PATH`; or why there
/// is none.
pub fn find_promtool() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(PROMTOOL_ENV).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{PROMTOOL_ENV}={} is not a file", path.display()))
        };
    }
    which::which("promtool").map_err(|_| {
        format!(
            "promtool is not on PATH and {PROMTOOL_ENV} is not set (Debian: apt-get install prometheus)"
        )
    })
}

/// `promtool` when there is one; otherwise `None` after saying why on stderr, so the test
/// can return. Panics instead when [`REQUIRE_ENV`] is `1`.
pub fn promtool_or_skip() -> Option<PathBuf> {
    match find_promtool() {
        Ok(path) => Some(path),
        Err(why) if std::env::var(REQUIRE_ENV).as_deref() == Ok("1") => {
            panic!("{REQUIRE_ENV}=1 but {why}")
        }
        Err(why) => {
            // A note to whoever runs the tests, not a daemon's log.
            eprintln!("skipped: {why}");
            None
        }
    }
}

/// Runs `promtool check metrics` on `text` (the classic text format) with the `promtool` at
/// `promtool`: `Ok` when it finds nothing wrong, otherwise what it said.
pub fn promtool_check_with(promtool: &Path, text: &str) -> Result<(), String> {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", promtool.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| format!("cannot write to promtool: {e}"))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("cannot wait for promtool: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "promtool check metrics: {}\n{}{}\n--- the text checked:\n{text}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}

/// [`promtool_check_with`] the `promtool` [`find_promtool`] finds; an error when there is none.
pub fn promtool_check(text: &str) -> Result<(), String> {
    promtool_check_with(&find_promtool()?, text)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::exposition::classic;

    #[test]
    fn promtool_passes_the_classic_text_and_names_what_is_wrong_otherwise() {
        let Some(promtool) = promtool_or_skip() else {
            return;
        };
        let good = classic(
            "# HELP t_turns Turns ended.\n# TYPE t_turns counter\nt_turns_total 2\n# EOF\n",
        );
        promtool_check_with(&promtool, &good).unwrap();
        // A counter without `_total` breaks Prometheus' naming rules.
        let bad = "# HELP t_turns Turns ended.\n# TYPE t_turns counter\nt_turns 2\n";
        let err = promtool_check_with(&promtool, bad).unwrap_err();
        assert!(err.contains("t_turns"), "{err}");
    }

    #[test]
    fn a_promtool_that_is_not_there_is_an_error_that_says_so() {
        let err = promtool_check_with(Path::new("/nonexistent/promtool"), "").unwrap_err();
        assert!(err.contains("/nonexistent/promtool"), "{err}");
    }
}
