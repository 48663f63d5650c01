//! `boxctl schedules` and `boxctl schedule run|pause|resume` against loopd's real API layer
//! over the stub's schedules (`daily`, `hourly`): what each prints, with and without `--json`,
//! and the exit codes (3 when the previous run still goes, 6 for no such schedule).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_stub::*;
use proto::api::{ApiError, ScheduleInfo, ScheduleList, ScheduleStarted, error_kind};

#[tokio::test]
async fn boxctl_schedules_lists_timing_next_and_last_run_and_its_outcome() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["schedules"]).await;
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("NAME "), "{out}");
    for (line, name, parts, outcome) in [
        (
            lines[1],
            "daily ",
            [
                "cron 0 7 * * * (UTC)",
                "2026-01-03 07:00:00Z (",
                "due 2026-01-02 07:00:00Z, daily-20260102T070000Z#1",
            ],
            "  done, notified",
        ),
        (
            lines[2],
            "hourly ",
            [
                "every 1h ",
                "2026-01-02 08:00:00Z (",
                "manual 2026-01-02 06:30:00Z, checks ",
            ],
            "  running",
        ),
    ] {
        assert!(line.starts_with(name), "{line}");
        for part in parts {
            assert!(line.contains(part), "{part:?} missing: {line}");
        }
        assert!(line.ends_with(outcome), "{line}");
    }
}

#[tokio::test]
async fn boxctl_schedules_json_prints_loopds_list_and_none_says_so() {
    let served = start();
    let (code, out, _) = boxctl(&served, &["schedules", "--json"]).await;
    assert_eq!(code, Some(0));
    let list: ScheduleList = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(list.schedules, vec![stub_schedule(false), stub_hourly()]);
    served.stub.schedules.0.lock().unwrap().clear();
    let (code, out, err) = boxctl(&served, &["schedules"]).await;
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(
        out,
        "no schedules configured ([[schedules]] or [heartbeat] in loopd.toml)\n"
    );
}

#[tokio::test]
async fn boxctl_schedule_run_names_the_session_and_turn() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["schedule", "run", "daily"]).await;
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(
        out,
        "daily runs now: session daily-20260102T070000Z, turn 1 \
         (boxctl show daily-20260102T070000Z --follow watches it)\n"
    );
    let (code, out, _) = boxctl(&served, &["--json", "schedule", "run", "daily"]).await;
    assert_eq!(code, Some(0));
    let started: ScheduleStarted = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((started.name.as_str(), started.turn), ("daily", 1));
}

#[tokio::test]
async fn boxctl_schedule_run_while_the_previous_run_goes_exits_3() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["schedule", "run", "hourly"]).await;
    assert_eq!(code, Some(3));
    assert_eq!(out, "");
    assert_eq!(
        err,
        "boxctl: schedule hourly: its previous run still goes\n"
    );
    let (code, out, _) = boxctl(&served, &["schedule", "run", "hourly", "--json"]).await;
    assert_eq!(code, Some(3));
    let error: ApiError = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(error.error.kind, error_kind::BUSY);
}

#[tokio::test]
async fn boxctl_schedule_with_an_unknown_name_exits_6() {
    let served = start();
    for verb in ["run", "pause", "resume"] {
        let (code, out, err) = boxctl(&served, &["schedule", verb, "nope"]).await;
        assert_eq!(code, Some(6), "{verb}: {err}");
        assert_eq!(out, "", "{verb}");
        assert_eq!(
            err,
            "boxctl: no such schedule nope; boxctl schedules lists them \
             (no schedule named \"nope\")\n",
            "{verb}"
        );
        let (code, out, _) = boxctl(&served, &["--json", "schedule", verb, "nope"]).await;
        assert_eq!(code, Some(6), "{verb}");
        let error: ApiError = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(error.error.kind, error_kind::NOT_FOUND, "{verb}");
    }
}

#[tokio::test]
async fn boxctl_schedule_pause_and_resume_say_what_loopd_keeps() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["schedule", "pause", "daily"]).await;
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(
        out,
        "daily is paused (kept across restarts): it does not run by itself until \
         boxctl schedule resume daily\n"
    );
    let (_, listed, _) = boxctl(&served, &["schedules"]).await;
    let daily = listed.lines().find(|l| l.starts_with("daily ")).unwrap();
    assert!(daily.contains(" paused "), "{daily}");
    let (code, out, _) = boxctl(&served, &["schedule", "resume", "daily", "--json"]).await;
    assert_eq!(code, Some(0));
    let info: ScheduleInfo = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(info, stub_schedule(false));
    let (code, out, _) = boxctl(&served, &["schedule", "resume", "daily"]).await;
    assert_eq!(code, Some(0));
    assert!(
        out.starts_with("daily is resumed: next run 2026-01-03 07:00:00Z ("),
        "{out}"
    );
}
