//! `[[schedules]]`: every refusal names its key, and `--check-config` shows the next run times.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::config::*;
use bxconfig::{CheckOutcome, ConfigError, Loader, check_config};
use std::io::Write;

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

/// The keys `text` is refused at, with their messages.
fn refused(text: &str) -> Vec<(String, String)> {
    let f = file(text);
    match Loader::new(f.path(), ENV_PREFIX)
        .load_valid::<Config>()
        .unwrap_err()
    {
        ConfigError::Keys { problems } => {
            problems.into_iter().map(|p| (p.key, p.message)).collect()
        }
        other => panic!("expected key problems, got {other}"),
    }
}

/// One `[[schedules]]` entry: a valid one with `extra` lines replacing its defaults.
fn entry(lines: &str) -> String {
    format!("[[schedules]]\n{lines}\n")
}

fn assert_refused(text: &str, key: &str, says: &str) {
    let found = refused(text);
    assert!(
        found.iter().any(|(k, m)| k == key && m.contains(says)),
        "expected {key} refused with {says:?}, got {found:?}"
    );
}

const OK: &str = "name = \"morning\"\ncron = \"0 7 * * *\"\ntask = \"Summarise.\"";

#[test]
fn a_valid_entry_loads_with_its_defaults() {
    let f = file(&entry(OK));
    let cfg: Config = Loader::new(f.path(), ENV_PREFIX).load_valid().unwrap();
    let s = &cfg.schedules[0];
    assert_eq!(s.timezone, "UTC");
    assert_eq!(s.session, NEW_SESSION);
    assert_eq!(
        (s.missed, s.notify, s.enabled),
        (Missed::Skip, Notify::UnlessQuiet, true)
    );
    assert_eq!(s.task_source(), Some(TaskSource::Text("Summarise.".into())));
}

#[test]
fn a_bad_cron_expression_interval_or_time_zone_is_named_by_key() {
    let bad_cron = format!(
        "{}{}",
        entry(OK),
        entry("name = \"b\"\ncron = \"61 7 * * *\"\ntask = \"x\"")
    );
    assert_refused(
        &bad_cron,
        "schedules[1].cron",
        "not a five-field cron expression",
    );
    assert_refused(
        &entry("name = \"b\"\ncron = \"0 0 7 * * *\"\ntask = \"x\""),
        "schedules[0].cron",
        "five-field",
    );
    assert_refused(
        &entry("name = \"b\"\nevery = \"soon\"\ntask = \"x\""),
        "schedules[0].every",
        "not a duration",
    );
    assert_refused(
        &entry("name = \"b\"\nevery = \"1ms\"\ntask = \"x\""),
        "schedules[0].every",
        "shorter than",
    );
    // Far beyond any due time the scheduler can compute: it would never run (issue 33).
    assert_refused(
        &entry("name = \"b\"\nevery = \"300000years\"\ntask = \"x\""),
        "schedules[0].every",
        "\"300000years\" is longer than 36525 days (100 years): a schedule that long would \
         never run",
    );
    assert_refused(
        "[heartbeat]\nevery = \"300000years\"\n",
        "heartbeat.every",
        "would never run",
    );
    assert_refused(
        &entry(&format!("{OK}\ntimezone = \"Mars/Olympus\"")),
        "schedules[0].timezone",
        "not an IANA time zone",
    );
}

#[test]
fn exactly_one_timing_and_one_task_are_required() {
    assert_refused(
        &entry(&format!("{OK}\nevery = \"1h\"")),
        "schedules[0].cron",
        "not both",
    );
    assert_refused(
        &entry("name = \"b\"\ntask = \"x\""),
        "schedules[0].cron",
        "give cron",
    );
    assert_refused(
        &entry(&format!("{OK}\ntask_file = \"/etc/boxmaker/t.md\"")),
        "schedules[0].task",
        "not both",
    );
    assert_refused(
        &entry("name = \"b\"\ncron = \"0 7 * * *\""),
        "schedules[0].task",
        "give task",
    );
    assert_refused(
        &entry("name = \"b\"\ncron = \"0 7 * * *\"\ntask = \"  \""),
        "schedules[0].task",
        "empty",
    );
    assert_refused(
        &entry("name = \"b\"\ncron = \"0 7 * * *\"\ntask_file = \"t.md\""),
        "schedules[0].task_file",
        "absolute",
    );
}

#[test]
fn names_are_unique_valid_and_not_the_heartbeats() {
    assert_refused(
        &format!("{}{}", entry(OK), entry(OK)),
        "schedules[1].name",
        "already the name of schedules[0]",
    );
    assert_refused(
        &entry("name = \"heartbeat\"\ncron = \"0 7 * * *\"\ntask = \"x\""),
        "schedules[0].name",
        "heartbeat's schedule",
    );
    // Its `new` sessions would be `sub-...`: subagents' ids, with their grants.
    for name in ["sub", "sub-daily"] {
        assert_refused(
            &entry(&format!(
                "name = \"{name}\"\ncron = \"0 7 * * *\"\ntask = \"x\""
            )),
            "schedules[0].name",
            "subagents' ids",
        );
    }
    assert_refused(
        &entry("name = \"no spaces\"\ncron = \"0 7 * * *\"\ntask = \"x\""),
        "schedules[0].name",
        "not a schedule name",
    );
    let long = "n".repeat(MAX_SCHEDULE_NAME_BYTES + 1);
    assert_refused(
        &entry(&format!(
            "name = \"{long}\"\ncron = \"0 7 * * *\"\ntask = \"x\""
        )),
        "schedules[0].name",
        "not a schedule name",
    );
}

#[test]
fn a_fixed_session_must_be_a_valid_id_and_not_reserved() {
    assert_refused(
        &entry(&format!("{OK}\nsession = \"heartbeat\"")),
        "schedules[0].session",
        "loopd's own",
    );
    assert_refused(
        &entry(&format!("{OK}\nsession = \"sub-x-1\"")),
        "schedules[0].session",
        "subagents'",
    );
    assert_refused(
        &entry(&format!("{OK}\nsession = \"a/b\"")),
        "schedules[0].session",
        "a/b",
    );
    let f = file(&entry(&format!("{OK}\nsession = \"reports\"")));
    let cfg: Config = Loader::new(f.path(), ENV_PREFIX).load_valid().unwrap();
    assert_eq!(cfg.schedules[0].fixed_session(), Some("reports"));
}

#[test]
fn check_config_shows_the_next_three_run_times_of_every_enabled_schedule() {
    let text = format!(
        "{}{}",
        entry(&format!("{OK}\ntimezone = \"Europe/Berlin\"")),
        entry("name = \"off\"\nevery = \"1h\"\ntask = \"x\"\nenabled = false")
    );
    let f = file(&text);
    let CheckOutcome::Valid(out) = check_config::<Config>(&Loader::new(f.path(), ENV_PREFIX))
    else {
        panic!("valid")
    };
    let line = out
        .lines()
        .find(|l| l.starts_with("# schedule morning"))
        .unwrap_or_else(|| panic!("no note for morning in {out}"));
    assert_eq!(
        line.matches("T07:00:00+0").count(),
        CHECK_RUN_TIMES,
        "{line}"
    );
    assert!(
        !out.contains("# schedule off"),
        "a disabled schedule has no run times: {out}"
    );
}

#[test]
fn notes_list_every_run_times_from_now() {
    let s: Schedule =
        serde_json::from_str(r#"{"name": "e", "every": "30m", "task": "x"}"#).unwrap();
    let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    let notes = schedules::notes(&[s], now);
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0].ends_with(
            "2026-01-01T00:30:00+00:00, 2026-01-01T01:00:00+00:00, 2026-01-01T01:30:00+00:00"
        ),
        "{}",
        notes[0]
    );
}

#[test]
fn check_config_shows_the_heartbeats_run_times_too() {
    let f = file("[heartbeat]\nevery = \"30m\"\n");
    let CheckOutcome::Valid(out) = check_config::<Config>(&Loader::new(f.path(), ENV_PREFIX))
    else {
        panic!("valid")
    };
    let line = out
        .lines()
        .find(|l| l.starts_with("# schedule heartbeat (every 30m)"))
        .unwrap_or_else(|| panic!("no note for the heartbeat in {out}"));
    assert_eq!(line.matches(", ").count(), CHECK_RUN_TIMES - 1, "{line}");
}

#[test]
fn notify_to_is_channel_colon_target_and_loopd_only_keeps_it() {
    let f = file(&entry(&format!(
        "{OK}\nnotify_to = \"matrix:!abc:example.org\""
    )));
    let cfg: Config = Loader::new(f.path(), ENV_PREFIX).load_valid().unwrap();
    assert_eq!(
        cfg.schedules[0].notify_to.as_deref(),
        Some("matrix:!abc:example.org")
    );
    for bad in ["matrix", ":room", "matrix:", "Matrix:!a:b", "matrix:!a b"] {
        assert_refused(
            &entry(&format!("{OK}\nnotify_to = {bad:?}")),
            "schedules[0].notify_to",
            "is not CHANNEL:TARGET",
        );
    }
    let long = format!("matrix:{}", "a".repeat(MAX_NOTIFY_TO_BYTES));
    assert_refused(
        &entry(&format!("{OK}\nnotify_to = {long:?}")),
        "schedules[0].notify_to",
        "at most",
    );
}
