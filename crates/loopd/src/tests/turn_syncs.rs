#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 36, a warm turn's file syncs: a turn's answer and its `turn_end` reach the disk in
//! one `fdatasync`, since the owner is told the turn ended only once its end is on disk.

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
    // Every record but the header (written when the session was made) was appended.
    let appended = n as u64 - 1;
    assert_eq!(
        session.data_syncs(),
        appended - 1,
        "one sync for the answer and the end"
    );
}
