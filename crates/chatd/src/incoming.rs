//! What a timeline event says to chatd: a text message (and what it replies to), a reaction,
//! or nothing chatd reads. Edits are nothing: an edited task is not a new one.

use matrix_sdk::deserialized_responses::TimelineEvent;
use matrix_sdk::ruma::events::reaction::SyncReactionEvent;
use matrix_sdk::ruma::events::room::message::{MessageType, Relation, SyncRoomMessageEvent};
use matrix_sdk::ruma::events::{AnySyncMessageLikeEvent, AnySyncTimelineEvent};
use matrix_sdk::ruma::{OwnedEventId, OwnedUserId};

/// An event chatd reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// A text message.
    Text {
        /// Who sent it.
        sender: OwnedUserId,
        /// Its event id.
        event: OwnedEventId,
        /// Its body.
        body: String,
        /// The event it replies to, if it is a reply.
        reply_to: Option<OwnedEventId>,
    },
    /// A reaction to an event.
    Reaction {
        /// Who reacted.
        sender: OwnedUserId,
        /// The reaction's own event id.
        event: OwnedEventId,
        /// The event reacted to.
        to: OwnedEventId,
        /// The reaction (an emoji).
        key: String,
    },
}

impl Incoming {
    /// What `event` says, if chatd reads it.
    pub fn of(event: &TimelineEvent) -> Option<Incoming> {
        let Ok(AnySyncTimelineEvent::MessageLike(message)) = event.raw().deserialize() else {
            return None;
        };
        match message {
            AnySyncMessageLikeEvent::RoomMessage(SyncRoomMessageEvent::Original(m)) => {
                let reply_to = match &m.content.relates_to {
                    Some(Relation::Replacement(_)) => return None,
                    Some(Relation::Reply(reply)) => Some(reply.in_reply_to.event_id.clone()),
                    _ => None,
                };
                let MessageType::Text(text) = m.content.msgtype else {
                    return None;
                };
                Some(Incoming::Text {
                    sender: m.sender,
                    event: m.event_id,
                    body: text.body,
                    reply_to,
                })
            }
            AnySyncMessageLikeEvent::Reaction(SyncReactionEvent::Original(r)) => {
                Some(Incoming::Reaction {
                    sender: r.sender,
                    event: r.event_id,
                    to: r.content.relates_to.event_id,
                    key: r.content.relates_to.key,
                })
            }
            _ => None,
        }
    }

    /// Its event id.
    pub fn event(&self) -> &OwnedEventId {
        match self {
            Incoming::Text { event, .. } | Incoming::Reaction { event, .. } => event,
        }
    }

    /// Who sent it.
    pub fn sender(&self) -> &OwnedUserId {
        match self {
            Incoming::Text { sender, .. } | Incoming::Reaction { sender, .. } => sender,
        }
    }
}
