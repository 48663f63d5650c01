//! What others said in each room since the owner's last task there (`state_dir/heard.json`,
//! replaced whole at each change). A message of someone not an owner is never a task; in a
//! room the owner shares, it reaches the room's session with the owner's next task, as
//! untrusted text loopd writes before that task (`TaskRequest::overheard`).
//!
//! A message is kept here before the room's mark moves past it, so a crash loses none; one
//! read again after a crash is kept once (by its event id). Once a task that carried them is
//! handed to loopd (and kept in `tasks.json`, which hands it again with the same words), they
//! are forgotten.

use crate::error::ChatError;
use crate::reply::cut;
use crate::store::Store;
use matrix_sdk::ruma::{EventId, RoomId, UserId};
use proto::api::{
    MAX_OVERHEARD_PER_TASK, MAX_OVERHEARD_TEXT_BYTES, OverheardText, speaker_problem,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The file in the state directory, and what it is called in errors.
const FILE: &str = "heard.json";
const WHAT: &str = "what others said in the rooms";
/// How a speaker whose id loopd could not quote in its mark is named.
pub const SOMEONE: &str = "another-member";
/// The most bytes of what is heard, as JSON, in all rooms; past it the oldest messages go
/// first, whichever room they were said in. Well below what the state directory reads back (1 MiB), so
/// many busy rooms never make the file one chatd cannot start with.
pub const MAX_HEARD_JSON_BYTES: usize = 256 * 1024;

/// One message heard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Line {
    /// Its place among all the messages heard, in every room: the oldest has the lowest.
    pub seq: u64,
    /// Its event id.
    pub event: String,
    /// What loopd is given.
    pub heard: OverheardText,
}

/// The messages heard, per room id, oldest first: at most [`MAX_OVERHEARD_PER_TASK`] each
/// (the oldest go first).
#[derive(Debug, Clone)]
pub struct Heard {
    store: Store,
    rooms: Arc<Mutex<BTreeMap<String, Vec<Line>>>>,
}

impl Heard {
    /// What `store` keeps.
    pub fn load(store: Store) -> Result<Heard, ChatError> {
        let rooms = store.read_json(WHAT, FILE)?.unwrap_or_default();
        Ok(Heard {
            store,
            rooms: Arc::new(Mutex::new(rooms)),
        })
    }

    /// Keeps what `from` said in `room` (event `event`), cut to what loopd takes; kept on
    /// disk when this returns.
    pub fn add(&self, room: &str, event: &str, from: &str, text: &str) -> Result<(), ChatError> {
        let mut rooms = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        if rooms
            .get(room)
            .is_some_and(|lines| lines.iter().any(|l| l.event == event))
        {
            return Ok(());
        }
        let seq = 1 + rooms
            .values()
            .flatten()
            .map(|l| l.seq)
            .max()
            .unwrap_or_default();
        let lines = rooms.entry(room.to_owned()).or_default();
        let from = match speaker_problem(from) {
            None => from.to_owned(),
            Some(_) => SOMEONE.to_owned(),
        };
        lines.push(Line {
            seq,
            event: event.to_owned(),
            heard: OverheardText {
                from,
                text: cut(text, MAX_OVERHEARD_TEXT_BYTES),
            },
        });
        if lines.len() > MAX_OVERHEARD_PER_TASK {
            lines.remove(0);
        }
        fit(&mut rooms);
        self.store.write_json(WHAT, FILE, &*rooms)
    }

    /// [`Heard::add`] for the sync loop: what `sender`, not an owner, said in `room`. One that
    /// cannot be kept is left out of the next task (logged), never made a task.
    pub fn keep(&self, room: &RoomId, event: &EventId, sender: &UserId, body: &str) {
        if let Err(error) = self.add(room.as_str(), event.as_str(), sender.as_str(), body) {
            tracing::error!(%room, %error, "cannot keep what another member said; it is left out of the next task");
        }
    }

    /// What was heard in `room` since its last task, oldest first.
    pub fn pending(&self, room: &str) -> Vec<OverheardText> {
        let rooms = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        rooms
            .get(room)
            .map(|lines| lines.iter().map(|l| l.heard.clone()).collect())
            .unwrap_or_default()
    }

    /// Forgets, in `room`, the messages a task handed to loopd carried.
    pub fn handed(&self, room: &str, carried: &[OverheardText]) -> Result<(), ChatError> {
        if carried.is_empty() {
            return Ok(());
        }
        let mut rooms = self.rooms.lock().unwrap_or_else(|p| p.into_inner());
        let Some(lines) = rooms.get_mut(room) else {
            return Ok(());
        };
        lines.retain(|l| !carried.contains(&l.heard));
        if lines.is_empty() {
            rooms.remove(room);
        }
        self.store.write_json(WHAT, FILE, &*rooms)
    }
}

/// Drops the oldest messages, of any room, until `rooms` is at most [`MAX_HEARD_JSON_BYTES`]
/// of JSON.
fn fit(rooms: &mut BTreeMap<String, Vec<Line>>) {
    while serde_json::to_vec(&*rooms).map_or(0, |json| json.len()) > MAX_HEARD_JSON_BYTES {
        // Each room's lines are oldest first: the oldest of all heads some room.
        let Some(oldest) = rooms
            .iter()
            .filter_map(|(room, lines)| Some((lines.first()?.seq, room.clone())))
            .min()
            .map(|(_, room)| room)
        else {
            return;
        };
        let lines = rooms.entry(oldest.clone()).or_default();
        lines.remove(0);
        if lines.is_empty() {
            rooms.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heard(dir: &std::path::Path) -> Heard {
        Heard::load(Store::open(dir).unwrap()).unwrap()
    }

    #[test]
    fn a_message_read_twice_is_kept_once_and_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let first = heard(&state);
        first.add("!r:x", "$1", "@bob:x", "hello").unwrap();
        first.add("!r:x", "$1", "@bob:x", "hello").unwrap();
        let again = heard(&state);
        let pending = again.pending("!r:x");
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].from, "@bob:x");
        again.handed("!r:x", &pending).unwrap();
        assert!(heard(&state).pending("!r:x").is_empty());
    }

    #[test]
    fn only_the_newest_are_kept_cut_and_a_name_loopd_refuses_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let kept = heard(&dir.path().join("state"));
        for i in 0..MAX_OVERHEARD_PER_TASK + 3 {
            kept.add("!r:x", &format!("${i}"), "@bob:[::1]", &"y".repeat(5_000))
                .unwrap();
        }
        let pending = kept.pending("!r:x");
        assert_eq!(pending.len(), MAX_OVERHEARD_PER_TASK);
        assert!(pending.iter().all(|h| h.from == SOMEONE));
        assert!(pending[0].text.len() <= MAX_OVERHEARD_TEXT_BYTES);
        assert_eq!(proto::api::overheard_problem(&pending), None);
        assert!(kept.pending("!other:x").is_empty());
    }

    #[test]
    fn many_busy_rooms_stay_within_the_bytes_the_state_directory_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let kept = heard(&state);
        // Control characters take six bytes each as JSON.
        let text = "\u{1}".repeat(MAX_OVERHEARD_TEXT_BYTES);
        for room in 0..30 {
            for event in 0..3 {
                kept.add(
                    &format!("!r{room}:x"),
                    &format!("${event}"),
                    "@bob:x",
                    &text,
                )
                .unwrap();
            }
        }
        let size = std::fs::metadata(state.join(FILE)).unwrap().len();
        assert!(size < 1024 * 1024, "{size} bytes");
        assert!(
            !heard(&state).pending("!r29:x").is_empty(),
            "the newest are kept"
        );
    }
}
