//! Following one task's turn in its room: the bot shows it is typing, each call that waits for
//! the owner is posted (`approvals`), and when the turn ends its answer is posted (`reply`).

use crate::approvals::request_text;
use crate::history;
use crate::ledger::Tasks;
use crate::posts::{Posted, Waiting};
use crate::reply::{ANSWER_FILE, Reply};
use boxctl::client::{EventStream, StreamItem};
use bxcore::{ApprovalId, DataClass, SessionId, TaskId, TurnEvent};
use matrix_sdk::Room;
use matrix_sdk::attachment::AttachmentConfig;
use matrix_sdk::ruma::events::room::message::RoomMessageEventContent;
use proto::api::PendingApproval;

/// What following a turn needs.
pub struct Follow {
    /// Where the task came from and the answer goes.
    pub room: Room,
    /// The task's session.
    pub session: SessionId,
    /// The highest label the room may see.
    pub max_class: DataClass,
    /// loopd, for the waiting calls' labels.
    pub loopd: boxctl::Client,
    /// The posts of waiting calls, which the sync loop answers.
    pub waiting: Waiting,
    /// The task's id.
    pub task_id: TaskId,
    /// Where it is kept as handed over, and then as answered.
    pub tasks: Tasks,
    /// Whether chatd had handed it over before (a restart came between): its answer is read
    /// back from the log.
    pub again: bool,
}

impl Follow {
    /// Reads `stream` to the turn's end, posting as it goes.
    pub async fn run(self, mut stream: EventStream) {
        if let Err(error) = self.room.typing_notice(true).await {
            tracing::debug!(%error, "cannot show the bot typing");
        }
        let mut reply = Reply::default();
        while !reply.ended() {
            match stream.next().await {
                Ok(Some(StreamItem::Event { event, .. })) => {
                    self.take(&event).await;
                    reply.take(&event);
                }
                Ok(Some(StreamItem::Comment(_))) => {}
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "the turn's events broke off");
                    break;
                }
            }
        }
        let _ = self.room.typing_notice(false).await;
        let reply = self.complete(reply).await;
        let out = reply.outgoing(&self.session, self.max_class);
        say(&self.room, &out.text).await;
        if let Some(file) = out.file {
            let attached = self
                .room
                .send_attachment(
                    ANSWER_FILE,
                    &mime::TEXT_PLAIN_UTF_8,
                    file.into_bytes(),
                    AttachmentConfig::new(),
                )
                .await;
            if let Err(error) = attached {
                tracing::warn!(%error, "cannot attach a long answer");
            }
        }
        tracing::info!(session = %self.session, task = %self.task_id, ended = reply.ended(), "a task's answer was posted");
        if reply.ended()
            && let Err(error) = self.tasks.answer(&self.task_id)
        {
            tracing::error!(%error, "cannot keep that a task was answered");
        }
        self.tasks.unfollow(&self.task_id);
    }

    /// `streamed`, or, for a task followed again or whose stream brought no text, the turn as
    /// its log holds it (with the stream's end).
    async fn complete(&self, streamed: Reply) -> Reply {
        let (true, Some(turn)) = (self.again || !streamed.has_body(), streamed.turn()) else {
            return streamed;
        };
        match history::turn_reply(&self.loopd, &self.session, turn).await {
            Some(logged) if streamed.ended() => logged.ended_as(&streamed),
            _ => streamed,
        }
    }

    async fn take(&self, event: &TurnEvent) {
        match event {
            TurnEvent::ApprovalRequested { approval, .. } => self.post_request(approval).await,
            TurnEvent::ApprovalDecided { approval, .. } => self.waiting.decided(approval),
            _ => {}
        }
    }

    /// The calls loopd says wait; none when it cannot say (logged).
    async fn waiting_calls(&self) -> Vec<PendingApproval> {
        match self.loopd.approvals().await {
            Ok(list) => list.value.approvals,
            Err(error) => {
                tracing::warn!(%error, "cannot read the waiting calls from loopd");
                Vec::new()
            }
        }
    }

    /// Posts the call waiting as `approval`, as loopd lists it (with its session's label).
    async fn post_request(&self, approval: &ApprovalId) {
        let pending = self
            .waiting_calls()
            .await
            .into_iter()
            .find(|p| &p.id == approval);
        // None: decided already, or loopd cannot say; nothing to answer here.
        if let Some(pending) = pending {
            post_call(&self.room, pending, self.max_class, &self.waiting).await;
        }
    }
}

/// Posts the call `pending` to `room` (as `request_text` shows it to a room of `max_class`)
/// and remembers the post in `waiting`, unless it has a post already or another task is
/// posting it: each call is posted once.
pub async fn post_call(
    room: &Room,
    pending: PendingApproval,
    max_class: DataClass,
    waiting: &Waiting,
) {
    if !waiting.claim(&pending.id) {
        return;
    }
    let text = request_text(&pending, max_class);
    match room.send(RoomMessageEventContent::text_plain(text)).await {
        Ok(sent) => waiting.insert(
            sent.response.event_id,
            Posted {
                approval: pending.id,
                room: room.room_id().to_owned(),
            },
        ),
        Err(error) => {
            tracing::warn!(%error, "cannot post a call waiting for approval");
            waiting.unclaim(&pending.id);
        }
    }
}

/// Posts `text` to `room`; a failure is logged (the room cannot be told).
pub async fn say(room: &Room, text: &str) {
    if let Err(error) = room.send(RoomMessageEventContent::text_plain(text)).await {
        tracing::warn!(room = %room.room_id(), %error, "cannot post to the room");
    }
}
