//! The tests' check of an exposition with the real thing: `promtool check metrics`, through
//! `bxmetrics::testing` (skipped with the reason without promtool, unless
//! `BOXMAKER_REQUIRE_PROMETHEUS=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Checks `classic` (the classic text format, what promtool reads) with `promtool check
/// metrics`; panics with promtool's words when it finds a problem.
pub fn check(classic: &str) {
    let Some(promtool) = bxmetrics::testing::promtool_or_skip() else {
        return;
    };
    bxmetrics::testing::promtool_check_with(&promtool, classic).unwrap();
}
