//! loopd's notifications (a schedule's result, a call left waiting) posted to the rooms: to the
//! room a schedule's `notify_to = "matrix:ROOM"` names, else to `matrix.notify_room`, as one
//! line that starts with the session's name. A notification labelled above `matrix.max_class`
//! is posted as a line saying where to read it.
//!
//! loopd keeps its notifications in an append-only journal and lists them in order; chatd
//! reads the list every [`POLL_MS`] and keeps how far it has posted (`store`: the count and the
//! last one's key) after each post, so a restart posts none twice but the one a crash cut
//! short. The first run starts at the end of the list: what was notified before chatd first
//! ran is not posted.

use crate::error::ChatError;
use crate::store::{NoticeCursor, Store};
use crate::turn::say;
use boxctl::safe_text::one_line;
use bxcore::DataClass;
use matrix_sdk::ruma::{OwnedRoomId, RoomId};
use matrix_sdk::{Client, RoomState};
use proto::api::Notification;
use std::time::Duration;

/// How often loopd's notifications are read, in milliseconds.
pub const POLL_MS: u64 = 2_000;
/// How a `notify_to` for chatd starts.
pub const MATRIX_PREFIX: &str = "matrix:";
/// How much of a notification's text a line shows, in characters.
const LINE_CHARS: usize = 2_000;

/// Posts loopd's notifications.
pub struct Notices {
    /// chatd's client, signed in.
    pub client: Client,
    /// loopd.
    pub loopd: boxctl::Client,
    /// chatd's state.
    pub store: Store,
    /// Where a notification without its own room goes; none: nowhere.
    pub default_room: Option<OwnedRoomId>,
    /// The highest label a room may see.
    pub max_class: DataClass,
}

/// The key of a notification, by which chatd finds where it stopped.
pub fn key_of(n: &Notification) -> String {
    format!("{} {} {}", n.time, n.session, n.turn)
}

/// The notifications of `list` not yet posted by `cursor`, and the cursor after them. A list
/// that no longer holds the cursor's last one where it was (loopd's journal was replaced) is
/// searched for it; not found, chatd starts at the list's end.
pub fn after<'a>(
    list: &'a [Notification],
    cursor: &NoticeCursor,
) -> (&'a [Notification], NoticeCursor) {
    let holds =
        |at: usize| at > 0 && list.get(at - 1).map(key_of).as_deref() == cursor.last.as_deref();
    let start = if cursor.seen == 0 || holds(cursor.seen) {
        cursor.seen.min(list.len())
    } else {
        match list.iter().position(|n| Some(key_of(n)) == cursor.last) {
            Some(at) => at + 1,
            None => list.len(),
        }
    };
    let new = &list[start..];
    let next = NoticeCursor {
        seen: list.len(),
        last: list.last().map(key_of),
    };
    (new, next)
}

/// The room `n` goes to: its `matrix:ROOM`, else `default`.
pub fn room_of(n: &Notification, default: Option<&RoomId>) -> Option<OwnedRoomId> {
    match n
        .to
        .as_deref()
        .and_then(|to| to.strip_prefix(MATRIX_PREFIX))
    {
        Some(room) => RoomId::parse(room).ok(),
        None => default.map(RoomId::to_owned),
    }
}

/// The line `n` is posted as in a room that may see up to `max_class`.
pub fn line(n: &Notification, max_class: DataClass) -> String {
    if n.class > max_class {
        return format!(
            "[{}] a notification labelled above what this room may see: read it on the box \
             with `boxctl notifications`.",
            n.session
        );
    }
    format!("[{}] {}", n.session, one_line(&n.text, Some(LINE_CHARS)))
}

impl Notices {
    /// On chatd's first run, takes loopd's list as it is as posted (what was notified before
    /// is not posted), before anything else runs; later runs keep their cursor. loopd out of
    /// reach: the first read in [`Notices::run`] does it.
    pub async fn prime(&self) -> Result<(), ChatError> {
        if self.store.notice_cursor()?.is_some() {
            return Ok(());
        }
        if let Ok(list) = self.loopd.notifications().await {
            let (_, start) = after(&list.value.notifications, &NoticeCursor::default());
            self.store.save_notice_cursor(&start)?;
        }
        Ok(())
    }

    /// Reads and posts until the process stops; an error is chatd's state that cannot be
    /// written.
    pub async fn run(self) -> Result<(), ChatError> {
        let mut cursor = self.store.notice_cursor()?;
        loop {
            match self.loopd.notifications().await {
                Ok(list) => {
                    let list = list.value.notifications;
                    let (new, next) = after(&list, &cursor.clone().unwrap_or_default());
                    // Without a cursor (loopd was out of reach at the start), this read is the
                    // first: nothing before it is posted.
                    if cursor.is_some() {
                        let start = next.seen - new.len();
                        for (i, n) in new.iter().enumerate() {
                            self.post(n).await;
                            // Kept after each post: a crash posts at most this one again.
                            let posted = NoticeCursor {
                                seen: start + i + 1,
                                last: Some(key_of(n)),
                            };
                            self.store.save_notice_cursor(&posted)?;
                            cursor = Some(posted);
                        }
                    }
                    if cursor.as_ref() != Some(&next) {
                        self.store.save_notice_cursor(&next)?;
                        cursor = Some(next);
                    }
                }
                Err(error) => tracing::debug!(%error, "cannot read loopd's notifications"),
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    async fn post(&self, n: &Notification) {
        let Some(room_id) = room_of(n, self.default_room.as_deref()) else {
            tracing::debug!(session = %n.session, "a notification with no room to go to");
            return;
        };
        match self.client.get_room(&room_id) {
            Some(room) if room.state() == RoomState::Joined => {
                say(&room, &line(n, self.max_class)).await;
            }
            _ => {
                tracing::warn!(room = %room_id, session = %n.session, "a notification's room is not one the bot is in")
            }
        }
    }
}

#[cfg(test)]
mod tests;
