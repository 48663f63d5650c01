#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 36, a turn's file syncs: a turn's answer and its `turn_end` reach the disk in one
//! `fdatasync`, since the owner is told the turn ended only once its end is on disk; an
//! epoch's baseline goes with them, in the log; and a new session is made by its first
//! record in one file sync and two directory syncs.

use super::turn::Bed;
use crate::tools::FakeTools;
use bxcore::{LogRecord, TurnEnd};

#[test]
fn a_text_turns_answer_and_its_end_take_one_sync() {
    let bed = Bed::new("default_reply = \"hello\"\n");
    let (end, _, session) = bed.task("s", "hi", &FakeTools::new());
    assert_eq!(end.unwrap(), TurnEnd::Done);
    let records = session.records();
    let n = records.len();
    assert!(
        matches!(records[n - 2], LogRecord::Assistant { .. })
            && matches!(records[n - 1], LogRecord::TurnEnd { .. }),
        "{records:?}"
    );
    // Every record but the header was appended: the user record, synced with the header
    // before the task is acknowledged; the baseline and the answer, synced with the end.
    assert_eq!(
        kinds(records),
        ["header", "user", "baseline", "assistant", "turn_end"]
    );
    assert_eq!(session.data_syncs(), 2);
}

#[test]
fn a_new_sessions_first_turn_takes_four_syncs() {
    // Before: 7 until the end was durable (the header file and its directory, the sessions
    // directory, the user record, the baseline file and its directory, the answer and end).
    let bed = Bed::new("default_reply = \"hello\"\n");
    let before = bed.syncs();
    let (end, _, session) = bed.task("s", "hi", &FakeTools::new());
    assert_eq!(end.unwrap(), TurnEnd::Done);
    assert_eq!(
        bed.syncs() - before,
        4,
        "the log with its header and user record, the session's directory, the sessions \
         directory; the baseline, answer and end"
    );
    // A second turn of the same session: its user record, its answer and end.
    drop(session);
    let before = bed.syncs();
    let (end, _, _) = bed.task("s", "again", &FakeTools::new());
    assert_eq!(end.unwrap(), TurnEnd::Done);
    assert_eq!(bed.syncs() - before, 2);
}

fn kinds(records: &[LogRecord]) -> Vec<&'static str> {
    records.iter().map(LogRecord::kind).collect()
}
