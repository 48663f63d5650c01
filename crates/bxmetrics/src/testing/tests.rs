use super::*;
use crate::exposition::{classic, open_metrics};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::os::unix::fs::PermissionsExt;

/// A registry with one of each kind a daemon registers, labelled as the daemons label them.
fn registry() -> Registry {
    let mut registry = Registry::with_prefix("demo");
    let turns: Family<Vec<(String, String)>, Counter> = Family::default();
    turns
        .get_or_create(&vec![("outcome".to_string(), "done".to_string())])
        .inc();
    registry.register("turns", "Turns ended", turns);
    let depth: Gauge = Gauge::default();
    depth.set(2);
    registry.register("queued_tasks", "Tasks queued", depth);
    let duration = Histogram::new([0.1, 1.0]);
    duration.observe(0.5);
    registry.register_with_unit("turn_duration", "Turn time", Unit::Seconds, duration);
    registry
}

#[test]
fn the_classic_exposition_passes_promtool() {
    let Some(_) = promtool_or_skip() else { return };
    let text = classic(&open_metrics(&registry()).unwrap());
    assert_eq!(promtool_check(&text), Ok(()), "{text}");
}

#[test]
fn the_raw_open_metrics_text_of_a_counter_does_not_pass_promtool() {
    // Why `classic` exists: promtool (Debian's 2.42) reads the family name of the HELP and
    // TYPE lines as a metric without `_total`, and the `_total` sample as one with no help.
    let Some(_) = promtool_or_skip() else { return };
    let text = open_metrics(&registry()).unwrap();
    let complaint = promtool_check(&text).unwrap_err();
    assert!(complaint.contains("demo_turns"), "{complaint}");
}

#[test]
fn a_promtool_named_by_the_environment_must_be_a_file() {
    let err = find_promtool(Some("/nonexistent/promtool".into()), None).unwrap_err();
    assert!(
        err.contains("PROMTOOL=/nonexistent/promtool is not a file"),
        "{err}"
    );
    assert!(err.contains("scripts/fetch-parts.sh"), "{err}");
}

#[test]
fn without_the_environment_promtool_is_looked_up_on_path() {
    let empty = tempfile::tempdir().unwrap();
    let err = find_promtool(None, Some(empty.path().into())).unwrap_err();
    assert!(err.contains("no promtool on PATH"), "{err}");

    let bin = tempfile::tempdir().unwrap();
    let promtool = bin.path().join("promtool");
    std::fs::write(&promtool, "#!/bin/sh\nexit 0\n").unwrap();
    std::fs::set_permissions(&promtool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths([empty.path(), bin.path()]).unwrap();
    assert_eq!(find_promtool(Some("".into()), Some(path)), Ok(promtool));
}

#[test]
fn promtools_complaints_and_exit_status_come_back() {
    let bin = tempfile::tempdir().unwrap();
    let promtool = bin.path().join("promtool");
    std::fs::write(
        &promtool,
        "#!/bin/sh\ncat >/dev/null\necho 'x_total no help text' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&promtool, std::fs::Permissions::from_mode(0o755)).unwrap();
    let err = promtool_check_with(&promtool, "x_total 1\n").unwrap_err();
    assert!(err.contains("x_total no help text"), "{err}");
    assert!(err.contains("exit status: 3"), "{err}");
}

#[test]
fn a_missing_promtool_skips_unless_it_is_required() {
    assert_eq!(skip_or_fail(Err("gone".to_string()), false), None);
    let found = PathBuf::from("/usr/bin/promtool");
    assert_eq!(skip_or_fail(Ok(found.clone()), true), Some(found));
}

#[test]
#[should_panic(expected = "gone (BOXMAKER_REQUIRE_PROMETHEUS=1)")]
fn a_missing_promtool_fails_when_it_is_required() {
    skip_or_fail(Err("gone".to_string()), true);
}
