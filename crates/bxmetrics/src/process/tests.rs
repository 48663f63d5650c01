use super::*;
use crate::exposition::{classic, open_metrics};
use std::time::{SystemTime, UNIX_EPOCH};

fn registry() -> Registry {
    let mut registry = Registry::default();
    register(&mut registry, "demo", "1.2.3");
    registry
}

/// The value of the sample `series` (name and labels, exactly as written) in `text`.
fn sample_of(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.parse().ok()
    })
}

#[test]
fn build_info_is_one_with_the_version_and_the_commit() {
    let text = classic(&open_metrics(&registry()).unwrap());
    let commit = commit_label(BUILD_COMMIT);
    let series = format!("demo_build_info{{version=\"1.2.3\",commit=\"{commit}\"}}");
    assert_eq!(sample_of(&text, &series), Some(1.0), "{text}");
    assert!(text.contains("# TYPE demo_build_info gauge\n"), "{text}");
}

#[test]
fn a_commit_that_is_not_a_commit_name_is_unknown() {
    assert_eq!(commit_label(Some("0123abcd")), "0123abcd");
    assert_eq!(commit_label(Some("0123abcd-dirty\n")), "0123abcd-dirty");
    for bad in [
        None,
        Some(""),
        Some("a\"b"),
        Some("x}\n"),
        Some(&"a".repeat(71)),
    ] {
        assert_eq!(commit_label(bad), UNKNOWN_COMMIT, "{bad:?}");
    }
    assert_eq!(label_value("1.0\"\n"), "1.0__");
}

#[test]
fn the_process_metrics_are_this_process() {
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let text = classic(&open_metrics(&registry()).unwrap());
    for name in PROCESS_METRICS {
        assert!(sample_of(&text, name).is_some(), "no {name} in\n{text}");
    }
    assert!(
        text.contains("# TYPE process_cpu_seconds_total counter\n"),
        "{text}"
    );
    let started = sample_of(&text, "process_start_time_seconds").unwrap();
    // This test process started before the test, and after 2020 (ticks: 10 ms).
    assert!(
        started <= before + 1.0 && started > 1.6e9,
        "{started} vs {before}"
    );
    assert!(sample_of(&text, "process_resident_memory_bytes").unwrap() > 0.0);
    // Other tests open and close files meanwhile: no exact count, but at least stdin,
    // stdout and stderr, and under the limit.
    let open = sample_of(&text, "process_open_fds").unwrap();
    let max = sample_of(&text, "process_max_fds").unwrap();
    assert!(open >= 3.0 && open <= max, "{open} of {max}");
}

#[test]
fn the_exposition_with_them_passes_promtool() {
    let Some(_) = crate::testing::promtool_or_skip() else {
        return;
    };
    let text = classic(&open_metrics(&registry()).unwrap());
    assert_eq!(crate::testing::promtool_check(&text), Ok(()), "{text}");
}
