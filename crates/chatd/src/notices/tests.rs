//! Which notifications are new, where each goes, and what a room sees of it.
#![allow(clippy::unwrap_used)]

use super::*;
use bxcore::{SessionId, Timestamp};

fn note(turn: u64, to: Option<&str>, class: DataClass) -> Notification {
    Notification {
        time: Timestamp::parse("2026-12-07T08:00:00Z").unwrap(),
        session: SessionId::new("schedule-backup").unwrap(),
        turn,
        text: format!("run {turn}\nall well"),
        class,
        untrusted: false,
        to: to.map(str::to_owned),
    }
}

#[test]
fn only_what_came_after_the_cursor_is_new_and_the_cursor_follows() {
    let list: Vec<_> = (1..=3).map(|t| note(t, None, DataClass::Public)).collect();
    let (new, next) = after(&list, &NoticeCursor::default());
    assert_eq!(new.len(), 3);
    assert_eq!(next.seen, 3);
    let (new, again) = after(&list, &next);
    assert!(new.is_empty());
    assert_eq!(again, next);
    let mut longer = list.clone();
    longer.push(note(4, None, DataClass::Public));
    let (new, _) = after(&longer, &next);
    assert_eq!(new.iter().map(|n| n.turn).collect::<Vec<_>>(), [4]);
}

#[test]
fn a_replaced_list_is_searched_for_the_last_one_posted() {
    let list: Vec<_> = (1..=3).map(|t| note(t, None, DataClass::Public)).collect();
    let (_, cursor) = after(&list[..2], &NoticeCursor::default());
    // The journal lost its first line: the cursor's count no longer points at turn 2.
    let (new, _) = after(&list[1..], &cursor);
    assert_eq!(new.iter().map(|n| n.turn).collect::<Vec<_>>(), [3]);
    // A list without the last one posted: nothing old is posted again.
    let other: Vec<_> = (7..=8).map(|t| note(t, None, DataClass::Public)).collect();
    let (new, _) = after(&other, &cursor);
    assert!(new.is_empty());
}

#[test]
fn a_notification_goes_to_its_schedules_room_else_the_default() {
    let default = RoomId::parse("!default:hs").unwrap();
    let own = note(1, Some("matrix:!own:hs"), DataClass::Public);
    assert_eq!(room_of(&own, Some(&default)).unwrap().as_str(), "!own:hs");
    let plain = note(2, None, DataClass::Public);
    assert_eq!(room_of(&plain, Some(&default)).unwrap(), default);
    assert_eq!(room_of(&plain, None), None);
    let elsewhere = note(3, Some("mail:me@example.org"), DataClass::Public);
    assert_eq!(room_of(&elsewhere, None), None);
}

#[test]
fn a_line_names_the_session_and_never_shows_what_the_room_may_not_see() {
    let line_text = line(&note(1, None, DataClass::Private), DataClass::Private);
    assert_eq!(line_text, "[schedule-backup] run 1 ⏎ all well");
    let hidden = line(&note(1, None, DataClass::Secret), DataClass::Private);
    assert!(!hidden.contains("all well"), "{hidden}");
    assert!(hidden.contains("boxctl notifications"), "{hidden}");
}
