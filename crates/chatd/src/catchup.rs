//! What a room said since chatd last read it, read back from the homeserver's history
//! (`/messages`), not from the sync: after a crash the SDK has stored what it last synced and
//! does not hand those events over again, so a message chatd had not yet handed to loopd would
//! be lost. chatd keeps, per room, the last message it read (`store`: `marks.json`); at its
//! start it reads each room back to that mark (or to the bot's own joining, for a room with
//! none) and takes what came after, oldest first.

use matrix_sdk::Room;
use matrix_sdk::deserialized_responses::TimelineEvent;
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::events::room::member::{MembershipState, SyncRoomMemberEvent};
use matrix_sdk::ruma::events::{AnySyncStateEvent, AnySyncTimelineEvent};
use matrix_sdk::ruma::{EventId, UserId};

/// Events asked for per page of history.
const PAGE_EVENTS: u32 = 50;
/// The most pages read back in one room: a mark further back than this is not reached, and
/// the older messages are not tasks (a warning says so).
const MAX_PAGES: usize = 20;

/// Whether `event` is `bot` joining the room.
fn is_own_join(event: &TimelineEvent, bot: &UserId) -> bool {
    matches!(
        event.raw().deserialize(),
        Ok(AnySyncTimelineEvent::State(AnySyncStateEvent::RoomMember(
            SyncRoomMemberEvent::Original(member),
        ))) if member.state_key == bot && member.content.membership == MembershipState::Join
    )
}

/// The events of `room` after `mark` (or, without one, after `bot` last joined), oldest first.
pub async fn since(
    room: &Room,
    mark: Option<&EventId>,
    bot: &UserId,
) -> Result<Vec<TimelineEvent>, matrix_sdk::Error> {
    let mut newer = Vec::new();
    let mut from: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let mut options = MessagesOptions::backward();
        options.limit = PAGE_EVENTS.into();
        options.from = from.clone();
        let page = room.messages(options).await?;
        for event in page.chunk {
            let reached = match mark {
                Some(mark) => event.event_id().as_deref() == Some(mark),
                None => is_own_join(&event, bot),
            };
            if reached {
                newer.reverse();
                return Ok(newer);
            }
            newer.push(event);
        }
        match page.end {
            Some(end) => from = Some(end),
            None => break,
        }
    }
    tracing::warn!(room = %room.room_id(), "the last message read is too far back; older messages are not tasks");
    newer.reverse();
    Ok(newer)
}
