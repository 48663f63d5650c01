//! What a Matrix room and message are called on the box: the session a room's tasks run in,
//! and the task id of a message, from which loopd knows a message it has already run.

use crate::config::RoomEntry;
use bxcore::{SessionId, TaskId, ValueError};
use matrix_sdk::ruma::{EventId, RoomId};
use sha2::{Digest, Sha256};

/// How the session of a room without a `[[rooms]]` entry starts.
pub const ROOM_SESSION_PREFIX: &str = "matrix-";
/// How a message's task id starts.
pub const TASK_ID_PREFIX: &str = "mx-";
/// Hex digits of the room id's digest in a room's session id.
const ROOM_DIGEST_HEX: usize = 16;
/// Hex digits of the event id's digest in a task id (within bxcore's 48-byte limit).
const EVENT_DIGEST_HEX: usize = 40;

fn digest_hex(text: &str, digits: usize) -> String {
    let mut hex = hex::encode(Sha256::digest(text.as_bytes()));
    hex.truncate(digits);
    hex
}

/// The session `room`'s tasks run in: its `[[rooms]]` entry's, else `matrix-` and 16 hex
/// digits of the room id's sha256 (a room id holds characters a session id may not).
pub fn session_of(room: &RoomId, rooms: &[RoomEntry]) -> Result<SessionId, ValueError> {
    match rooms.iter().find(|entry| entry.room == room.as_str()) {
        Some(entry) => SessionId::new(&entry.session),
        None => SessionId::new(&format!(
            "{ROOM_SESSION_PREFIX}{}",
            digest_hex(room.as_str(), ROOM_DIGEST_HEX)
        )),
    }
}

/// The task id of the message `event`: `mx-` and 40 hex digits of its id's sha256. The same
/// message seen twice (a sync replayed after a crash) is the same task, which loopd runs once.
pub fn task_id_of(event: &EventId) -> Result<TaskId, ValueError> {
    TaskId::new(&format!(
        "{TASK_ID_PREFIX}{}",
        digest_hex(event.as_str(), EVENT_DIGEST_HEX)
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_room_has_one_session_unless_listed() {
        let room = RoomId::parse("!abcdef:example.org").unwrap();
        let other = RoomId::parse("!ghijkl:example.org").unwrap();
        let session = session_of(&room, &[]).unwrap();
        assert!(
            session.as_str().starts_with(ROOM_SESSION_PREFIX),
            "{session}"
        );
        assert_eq!(session, session_of(&room, &[]).unwrap());
        assert_ne!(session, session_of(&other, &[]).unwrap());
        let listed = [RoomEntry {
            room: room.to_string(),
            session: "home".into(),
        }];
        assert_eq!(session_of(&room, &listed).unwrap().as_str(), "home");
        assert_eq!(
            session_of(&other, &listed).unwrap(),
            session_of(&other, &[]).unwrap()
        );
    }

    #[test]
    fn a_message_is_one_task_whatever_its_id_holds() {
        let event = EventId::parse("$Rqnc-F-dvnEYJTyHq_iKxU2bZ1CI92-kuZq3a5lr5Zg").unwrap();
        let old_style = EventId::parse("$143273582443PhrSn:example.org").unwrap();
        let id = task_id_of(&event).unwrap();
        assert_eq!(id, task_id_of(&event).unwrap());
        assert_ne!(id, task_id_of(&old_style).unwrap());
        assert!(id.as_str().starts_with(TASK_ID_PREFIX));
        assert_eq!(id.as_str().len(), TASK_ID_PREFIX.len() + EVENT_DIGEST_HEX);
    }
}
