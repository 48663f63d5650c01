//! `boxctl usage [SESSION] [--day DATE]` against loopd's real API layer over the stub's
//! accounts (`api_stub::usage`): the table, `--json`, and the exit codes (4 for no such
//! session, 64 for a date that is not one, before anything is sent).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_stub::usage::{TODAY, s1_today};
use crate::api_stub::*;
use proto::api::UsageReport;

#[tokio::test]
async fn boxctl_usage_lists_todays_sessions_and_their_total() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["usage"]).await;
    assert_eq!((code, err.as_str()), (Some(0), ""));
    let expected = "\
usage on 2026-12-01 (UTC), every session
SESSION  TURNS  MODEL CALLS  EVALUATED  CACHED  GENERATED  MODEL TIME  TOOL CALLS
s1       3      7            12345      40000   2100       1m 1s       9
t-2      1      2            800        0       95         0.9s        0
(all)    4      9            13145      40000   2195       1m 2s       9
";
    assert_eq!(out, expected);
}

#[tokio::test]
async fn boxctl_usage_of_a_session_over_its_life_or_one_day() {
    let served = start();
    let (code, out, _) = boxctl(&served, &["usage", "s1"]).await;
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "usage of session s1, every day");
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[2].starts_with("s1 ") && lines[2].contains(" 13145 "),
        "{out}"
    );

    let (code, out, _) = boxctl(&served, &["usage", "t-2", "--day", TODAY]).await;
    assert_eq!(code, Some(0));
    assert!(
        out.starts_with("usage of session t-2 on 2026-12-01 (UTC)\n"),
        "{out}"
    );

    let (code, out, _) = boxctl(&served, &["usage", "--day", "2026-11-30"]).await;
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "usage on 2026-11-30 (UTC), every session");
    assert_eq!(lines.len(), 3, "only the zero total: {out}");
    assert!(lines[2].starts_with("(all) "), "{out}");
}

#[tokio::test]
async fn boxctl_usage_json_prints_loopds_report() {
    let served = start();
    let (code, out, _) = boxctl(&served, &["--json", "usage", "s1", "--day", TODAY]).await;
    assert_eq!(code, Some(0));
    let report: UsageReport = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report.totals, s1_today());
    assert_eq!(report.session.unwrap().as_str(), "s1");
}

#[tokio::test]
async fn boxctl_usage_of_an_unknown_session_exits_4_and_a_bad_date_64() {
    let served = start();
    let (code, out, err) = boxctl(&served, &["usage", "nobody"]).await;
    assert_eq!((code, out.as_str()), (Some(4), ""));
    assert!(err.contains("no session nobody"), "{err}");
    for bad in ["2026-02-30", "2026-1-5", "yesterday"] {
        let (code, _, err) = boxctl(&served, &["usage", "--day", bad]).await;
        assert_eq!(code, Some(64), "{bad}: {err}");
        assert!(err.contains("YYYY-MM-DD"), "{err}");
    }
}
