//! Zones from the system's database: names, local times in gaps and folds, and what is
//! refused. The test command installs tzdata where a machine lacks it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use chrono::{DateTime, LocalResult};

fn local(text: &str) -> NaiveDateTime {
    text.parse().unwrap()
}

#[test]
fn utc_needs_no_database() {
    let empty = tempfile::tempdir().unwrap();
    assert!(read_rules("UTC", &[empty.path().to_path_buf()]).is_err());
    for name in ["UTC", "Etc/UTC"] {
        let zone = Zone::named(name).unwrap();
        assert_eq!(zone.name(), "UTC");
        let t: DateTime<Utc> = "2026-07-01T12:00:00Z".parse().unwrap();
        assert_eq!(
            t.with_timezone(&zone).to_rfc3339(),
            "2026-07-01T12:00:00+00:00"
        );
    }
}

#[test]
fn an_instant_takes_the_zones_offset_of_that_day() {
    let berlin = Zone::named("Europe/Berlin").unwrap();
    let winter: DateTime<Utc> = "2026-01-15T12:00:00Z".parse().unwrap();
    let summer: DateTime<Utc> = "2026-07-15T12:00:00Z".parse().unwrap();
    assert_eq!(
        winter.with_timezone(&berlin).to_rfc3339(),
        "2026-01-15T13:00:00+01:00"
    );
    assert_eq!(
        summer.with_timezone(&berlin).to_rfc3339(),
        "2026-07-15T14:00:00+02:00"
    );
    // Far past the table's last transition the zone's rule string still applies.
    let later: DateTime<Utc> = "2090-07-15T12:00:00Z".parse().unwrap();
    assert_eq!(
        later.with_timezone(&berlin).to_rfc3339(),
        "2090-07-15T14:00:00+02:00"
    );
}

#[test]
fn a_local_time_the_clocks_skip_has_no_instant_and_one_they_repeat_has_two() {
    let berlin = Zone::named("Europe/Berlin").unwrap();
    // 2026-03-29: 02:00 becomes 03:00.
    assert!(matches!(
        berlin.from_local_datetime(&local("2026-03-29T02:30:00")),
        LocalResult::None
    ));
    // 2026-10-25: 03:00 becomes 02:00 again; the earlier instant is the summer one.
    match berlin.from_local_datetime(&local("2026-10-25T02:30:00")) {
        LocalResult::Ambiguous(earlier, later) => {
            assert_eq!(earlier.to_rfc3339(), "2026-10-25T02:30:00+02:00");
            assert_eq!(later.to_rfc3339(), "2026-10-25T02:30:00+01:00");
        }
        other => panic!("expected two instants, got {other:?}"),
    }
    let single = berlin
        .from_local_datetime(&local("2026-10-25T04:00:00"))
        .single()
        .unwrap();
    assert_eq!(single.to_rfc3339(), "2026-10-25T04:00:00+01:00");
}

#[test]
fn a_zone_is_read_once_and_compared_by_name() {
    let a = Zone::named("Asia/Kolkata").unwrap();
    let b = Zone::named("Asia/Kolkata").unwrap();
    assert!(Arc::ptr_eq(&a.0, &b.0), "the second lookup reads no file");
    assert_eq!(a, b);
    assert_ne!(a, Zone::utc());
    assert_eq!(format!("{a} {a:?}"), "Asia/Kolkata Zone(Asia/Kolkata)");
}

#[test]
fn a_name_that_could_leave_the_database_is_refused_before_any_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("zoneinfo");
    std::fs::create_dir(&db).unwrap();
    // A valid zone file outside the database: a name reaching it must not load it.
    let outside = dir.path().join("Outside");
    std::fs::copy(
        zoneinfo_dirs()
            .iter()
            .map(|d| d.join("Europe/Berlin"))
            .find(|p| p.exists())
            .unwrap(),
        &outside,
    )
    .unwrap();
    for name in [
        "../Outside",
        "Europe/../../Outside",
        "/etc/passwd",
        outside.to_str().unwrap(),
        "",
        "Europe//Berlin",
        "Europe/Berlin ",
        "./Europe/Berlin",
        &"A".repeat(MAX_ZONE_NAME_BYTES + 1),
    ] {
        let err = read_rules(name, std::slice::from_ref(&db)).unwrap_err();
        assert!(
            err.contains("a zone's name is like Area/City"),
            "{name:?}: {err}"
        );
        assert!(Zone::named(name).is_err(), "{name:?}");
    }
}

#[test]
fn a_missing_zone_or_a_file_that_is_not_one_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().to_path_buf();
    let err = read_rules("Mars/Olympus_Mons", std::slice::from_ref(&db)).unwrap_err();
    for needle in [
        "\"Mars/Olympus_Mons\" is not an IANA time zone name",
        "no such zone",
        &db.display().to_string(),
        "tzdata",
        "TZDIR",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    std::fs::write(db.join("zone.tab"), "# not a TZif file\n").unwrap();
    let err = read_rules("zone.tab", std::slice::from_ref(&db)).unwrap_err();
    assert!(err.contains("is not a time-zone file"), "{err}");
    std::fs::write(
        db.join("Huge"),
        vec![b'T'; MAX_ZONE_FILE_BYTES as usize + 1],
    )
    .unwrap();
    let err = read_rules("Huge", std::slice::from_ref(&db)).unwrap_err();
    assert!(err.contains("is larger than"), "{err}");
    assert!(Zone::named("Mars/Olympus_Mons").is_err());
}

#[test]
fn the_first_directory_holding_the_zone_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(first.join("Test")).unwrap();
    std::fs::create_dir_all(second.join("Test")).unwrap();
    let system = |name: &str| {
        zoneinfo_dirs()
            .iter()
            .map(|d| d.join(name))
            .find(|p| p.exists())
            .unwrap()
    };
    std::fs::copy(system("Asia/Tokyo"), second.join("Test/Zone")).unwrap();
    let tokyo = read_rules("Test/Zone", &[first.clone(), second.clone()]).unwrap();
    assert_eq!(tokyo.find_local_time_type(0).unwrap().ut_offset(), 9 * 3600);
    std::fs::copy(system("Asia/Kolkata"), first.join("Test/Zone")).unwrap();
    let kolkata = read_rules("Test/Zone", &[first, second]).unwrap();
    assert_eq!(
        kolkata.find_local_time_type(0).unwrap().ut_offset(),
        5 * 3600 + 1800
    );
}
