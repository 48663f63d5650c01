//! For the daemons' tests: the real `promtool check metrics` on an exposition, so what a
//! daemon serves is judged by Prometheus' own parser and linter, not by our reading of the
//! format.
//!
//! promtool comes from `$PROMTOOL` (what `scripts/fetch-parts.sh --print-paths` names, and
//! `scripts/test.sh` exports) or from `PATH`. A test without it skips with the reason on
//! stderr, unless [`REQUIRE_ENV`] is `1` (as `scripts/test.sh` sets it): then it fails, so the
//! test command cannot pass without having run the check.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Names promtool's path; `scripts/fetch-parts.sh --print-paths` prints it.
pub const PROMTOOL_ENV: &str = "PROMTOOL";

/// Set to `1` to make a missing promtool (or Prometheus) a failure, not a skip.
pub const REQUIRE_ENV: &str = "BOXMAKER_REQUIRE_PROMETHEUS";

/// How to get promtool, said once for every message that it is missing.
const HOW_TO_GET_IT: &str = "run `eval \"$(scripts/fetch-parts.sh --print-paths prometheus)\"` \
                             and export PROMTOOL (scripts/test.sh does)";

/// Runs `promtool check metrics` with `text` on its stdin. `Err` holds promtool's complaints
/// (a parse error, or lint problems such as a counter without `_total`), or why it could not
/// run at all (it is missing: see [`promtool_or_skip`]).
pub fn promtool_check(text: &str) -> Result<(), String> {
    let promtool = find_promtool(std::env::var_os(PROMTOOL_ENV), std::env::var_os("PATH"))?;
    promtool_check_with(&promtool, text)
}

/// promtool's path, or `None` after saying on stderr why the test skips; with [`REQUIRE_ENV`]
/// set to `1`, a missing promtool panics instead, with the same reason.
///
/// ```no_run
/// let Some(_) = bxmetrics::testing::promtool_or_skip() else { return };
/// ```
pub fn promtool_or_skip() -> Option<PathBuf> {
    let found = find_promtool(std::env::var_os(PROMTOOL_ENV), std::env::var_os("PATH"));
    skip_or_fail(found, required())
}

/// Whether [`REQUIRE_ENV`] is `1`: a missing Prometheus part must fail the test.
pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).as_deref() == Ok("1")
}

/// `found` when it is there; otherwise `None` after a note on stderr, or, when `require`, a
/// panic with the reason.
fn skip_or_fail(found: Result<PathBuf, String>, require: bool) -> Option<PathBuf> {
    match found {
        Ok(path) => Some(path),
        Err(why) => {
            assert!(!require, "{why} ({REQUIRE_ENV}=1)");
            eprintln!("skipping a promtool check: {why}");
            None
        }
    }
}

/// promtool from `promtool_env` (`$PROMTOOL`) when it is set, else from the directories of
/// `path_env` (`$PATH`).
fn find_promtool(
    promtool_env: Option<OsString>,
    path_env: Option<OsString>,
) -> Result<PathBuf, String> {
    if let Some(named) = promtool_env.filter(|p| !p.is_empty()) {
        let path = PathBuf::from(named);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "{PROMTOOL_ENV}={} is not a file: {HOW_TO_GET_IT}",
                path.display()
            ))
        };
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    which::which_in("promtool", path_env, cwd).map_err(|_| {
        format!("{PROMTOOL_ENV} is not set and there is no promtool on PATH: {HOW_TO_GET_IT}")
    })
}

/// `promtool check metrics` with the binary at `promtool` (from [`promtool_or_skip`]) on
/// `text`: `Ok` when it finds nothing wrong, otherwise what it said.
pub fn promtool_check_with(promtool: &Path, text: &str) -> Result<(), String> {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", promtool.display()))?;
    // From a thread: promtool could fill its output pipes before it has read all its input.
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| "promtool has no stdin".to_string())?;
    let input = text.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for {}: {e}", promtool.display()))?;
    let written = writer
        .join()
        .map_err(|_| "the thread writing to promtool panicked".to_string())?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(format!(
            "promtool check metrics failed ({}): {}",
            out.status,
            said.trim()
        ));
    }
    written.map_err(|e| format!("writing to promtool: {e}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
