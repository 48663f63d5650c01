//! The channel: reads the rooms from the homeserver and turns each owner's message into a loopd
//! task, in the room's session, under the message's own task id.
//!
//! What chatd has read is kept per room as a mark (the last message handled, moved only once
//! loopd has its task): at the start, and whenever a sync brings only the end of what a room
//! said, the room is read back from its mark (`catchup`), since the SDK does not hand over
//! again what it once synced. loopd runs a task id it already has once
//! (`names::task_id_of`), and `ledger` keeps each answer posted once. The first sync of a new
//! state directory only takes the rooms' state: what was said before chatd first ran is not a
//! task.

use crate::approvals::{answer_in_reaction, answer_in_reply};
use crate::catchup;
use crate::config::Config;
use crate::error::ChatError;
use crate::heard::Heard;
use crate::incoming::Incoming;
use crate::ledger::{Handed, Tasks};
use crate::names::{session_of, task_id_of};
use crate::policy::{Policy, Verdict};
use crate::posts::{Found, Waiting};
use crate::store::{Store, TakenRooms};
use crate::trust::Trust;
use crate::turn::{Follow, say};
use boxctl::ClientError;
use boxctl::approvals::answered_line;
use bxcore::{SessionId, TaskId};
use matrix_sdk::config::{SyncSettings, SyncToken};
use matrix_sdk::deserialized_responses::TimelineEvent;
use matrix_sdk::ruma::{EventId, OwnedEventId, RoomId, UserId};
use matrix_sdk::sync::SyncResponse;
use matrix_sdk::{Client, Room};
use proto::api::TaskRequest;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

/// The first pause after a failed sync or an unreachable loopd, in milliseconds.
const FIRST_RETRY_MS: u64 = 500;
/// The longest pause between tries, in milliseconds.
const MAX_RETRY_MS: u64 = 30_000;
/// The most event ids remembered as read in this process (a message read twice, from the sync
/// and from the history, is handled once).
const MAX_SEEN: usize = 4_096;
/// What the room is told, once, while loopd cannot be reached.
pub const RESTARTING: &str = "The box is restarting; your message will run once it is back.";

/// An owner's message, ready to be a task.
#[derive(Debug, Clone)]
struct Message {
    event: OwnedEventId,
    text: String,
}

/// The channel between the rooms and loopd.
pub struct Channel {
    cfg: Config,
    client: Client,
    store: Store,
    policy: Policy,
    loopd: boxctl::Client,
    taken: TakenRooms,
    waiting: Waiting,
    trust: Trust,
    tasks: Tasks,
    heard: Heard,
    marks: Mutex<BTreeMap<String, String>>,
    seen: Mutex<VecDeque<OwnedEventId>>,
}

impl Channel {
    /// The channel of `cfg`, signed in as `client`, its state in `store`.
    pub fn new(cfg: Config, client: Client, store: Store) -> Result<Channel, ChatError> {
        let parse =
            |id: &str| UserId::parse(id).map_err(|e| ChatError::Config(format!("{id:?}: {e}")));
        let owners = cfg
            .matrix
            .owners
            .iter()
            .map(|o| parse(o))
            .collect::<Result<Vec<_>, _>>()?;
        let policy = Policy::new(parse(&cfg.matrix.user)?, owners);
        let loopd = boxctl::Client::new(&cfg.loopd_socket);
        let trust = Trust::new(cfg.matrix.trusted_devices.clone());
        let taken = store.taken_rooms()?;
        let tasks = Tasks::load(store.clone())?;
        let heard = Heard::load(store.clone())?;
        let waiting = Waiting::load(store.clone())?;
        let marks = store.marks()?;
        Ok(Channel {
            cfg,
            client,
            store,
            policy,
            loopd,
            taken,
            waiting,
            trust,
            tasks,
            heard,
            marks: Mutex::new(marks),
            seen: Mutex::new(VecDeque::new()),
        })
    }

    /// Reads the rooms until the process is stopped; an error is one chatd cannot go on
    /// after (its state cannot be written).
    pub async fn run(mut self) -> Result<(), ChatError> {
        self.follow_unanswered().await;
        crate::unposted::post_unposted(
            &self.client,
            &self.loopd,
            &self.cfg,
            &self.taken,
            &self.waiting,
        )
        .await;
        self.catch_up().await;
        let mut token = self.store.sync_token()?;
        let mut retry_ms = FIRST_RETRY_MS;
        loop {
            let settings = SyncSettings::default()
                .timeout(Duration::from_millis(self.cfg.matrix.sync_timeout_ms))
                .token(match &token {
                    Some(token) => SyncToken::Specific(token.clone()),
                    None => SyncToken::NoToken,
                });
            let response = match self.client.sync_once(settings).await {
                Ok(response) => response,
                Err(error) => {
                    tracing::warn!(%error, retry_ms, "the homeserver's sync failed; trying again");
                    tokio::time::sleep(Duration::from_millis(retry_ms)).await;
                    retry_ms = (retry_ms * 2).min(MAX_RETRY_MS);
                    continue;
                }
            };
            retry_ms = FIRST_RETRY_MS;
            self.invitations(&response).await?;
            if token.is_some() {
                self.messages(&response).await;
            } else {
                tracing::info!("first sync: the rooms' earlier messages are not tasks");
            }
            self.store.save_sync_token(&response.next_batch)?;
            token = Some(response.next_batch);
        }
    }

    /// Joins the rooms an owner invited the bot to; leaves the others' invitations.
    async fn invitations(&mut self, response: &SyncResponse) -> Result<(), ChatError> {
        for room_id in response.rooms.invited.keys() {
            let Some(room) = self.client.get_room(room_id) else {
                continue;
            };
            let inviter = match room.invite_details().await {
                Ok(invite) => Some(invite.inviter_id),
                Err(error) => {
                    tracing::warn!(room = %room_id, %error, "cannot read who sent an invitation");
                    None
                }
            };
            let listed = self.cfg.rooms.iter().any(|r| r.room == room_id.as_str());
            match self.policy.invitation(inviter.as_deref(), listed) {
                Ok(()) => {
                    if let Err(error) = room.join().await {
                        tracing::warn!(room = %room_id, %error, "cannot join a room an owner invited the bot to");
                        continue;
                    }
                    let by = inviter.map_or_else(|| "the config".to_owned(), |i| i.to_string());
                    tracing::info!(room = %room_id, inviter = %by, "joined a room");
                    self.taken.insert(room_id.to_string(), by);
                    self.store.save_taken_rooms(&self.taken)?;
                }
                Err(why) => {
                    tracing::warn!(room = %room_id, %why, "an invitation was refused");
                    if let Err(error) = room.leave().await {
                        tracing::warn!(room = %room_id, %error, "cannot refuse an invitation");
                    }
                }
            }
        }
        Ok(())
    }

    /// Each room taken, read back from its mark (`catchup`): what came while chatd was down,
    /// or was read but not handed over when it stopped.
    async fn catch_up(&self) {
        for room_id in self.taken.keys() {
            let Some(room) = RoomId::parse(room_id)
                .ok()
                .and_then(|id| self.client.get_room(&id))
            else {
                continue;
            };
            let mark = self.mark_of(room_id);
            match catchup::since(&room, mark.as_deref(), self.policy.bot()).await {
                Ok(events) => {
                    for event in &events {
                        self.event(&room, event).await;
                    }
                }
                Err(error) => {
                    tracing::warn!(room = %room_id, %error, "cannot read the room back; what came while chatd was down is not read")
                }
            }
        }
    }

    /// Whether `incoming` is read for the first time in this process (the sync and the history
    /// may both bring it).
    fn first_time(&self, incoming: &Incoming) -> bool {
        let event = incoming.event().clone();
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(&event) {
            return false;
        }
        if seen.len() >= MAX_SEEN {
            seen.pop_front();
        }
        seen.push_back(event);
        true
    }

    /// Keeps `event` as the last message read in `room`.
    fn read(&self, room: &Room, event: &OwnedEventId) {
        let mut marks = self.marks.lock().unwrap_or_else(|p| p.into_inner());
        marks.insert(room.room_id().to_string(), event.to_string());
        if let Err(error) = self.store.save_marks(&marks) {
            tracing::error!(%error, "cannot keep the last message read");
        }
    }

    /// Every new message of the batch, room by room, in order.
    /// A timeline the homeserver cut short ("limited": more came than one sync returns) of a
    /// room chatd has read before is read back from its mark instead (`catchup`); a newly
    /// joined room's first timeline is always cut short, and is taken as it is.
    async fn messages(&self, response: &SyncResponse) {
        for (room_id, update) in &response.rooms.joined {
            let Some(room) = self.client.get_room(room_id) else {
                continue;
            };
            let mark = self.mark_of(room_id.as_str());
            if update.timeline.limited
                && let Some(mark) = mark
            {
                match catchup::since(&room, Some(&mark), self.policy.bot()).await {
                    Ok(events) => {
                        for event in &events {
                            self.event(&room, event).await;
                        }
                        continue;
                    }
                    Err(error) => {
                        tracing::warn!(room = %room_id, %error, "the homeserver left out some of the room's messages and they cannot be read back; they are not tasks")
                    }
                }
            }
            for event in &update.timeline.events {
                self.event(&room, event).await;
            }
        }
    }

    /// The last message read in `room`, if any.
    fn mark_of(&self, room: &str) -> Option<OwnedEventId> {
        self.marks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(room)
            .and_then(|m| EventId::parse(m).ok())
    }

    /// One timeline event of `room`: an owner's answer to a posted call is that call's
    /// decision; any other text message of an owner's is a task.
    async fn event(&self, room: &Room, event: &TimelineEvent) {
        let Some(incoming) = Incoming::of(event) else {
            return;
        };
        if !self.first_time(&incoming) {
            return;
        }
        let event_id = incoming.event().clone();
        let taken = self.taken.contains_key(room.room_id().as_str());
        let sender = incoming.sender().clone();
        let sent = self.trust.sent(&self.client, &sender, event).await;
        let verdict = self.policy.message(&sender, taken, &sent);
        let answered_post = match &incoming {
            Incoming::Text {
                reply_to: Some(to), ..
            }
            | Incoming::Reaction { to, .. }
                if self.waiting.is_post(to) =>
            {
                Some(to.clone())
            }
            _ => None,
        };
        match verdict {
            Verdict::Task => match (answered_post, incoming) {
                (Some(post), incoming) => self.answer(room, post, &incoming).await,
                (None, Incoming::Text { event, body, .. }) => {
                    self.task(room, Message { event, text: body }).await;
                }
                (None, Incoming::Reaction { .. }) => {}
            },
            Verdict::Refused(why) => {
                tracing::warn!(room = %room.room_id(), %sender, %why, "a message was refused");
                say(room, &why).await;
            }
            Verdict::NotOwner if answered_post.is_some() => {
                tracing::warn!(room = %room.room_id(), %sender, "an answer to a waiting call from someone not an owner is ignored");
            }
            Verdict::NotOwner => {
                tracing::info!(room = %room.room_id(), %sender, "a message from someone not an owner is not a task");
                if let (true, Incoming::Text { body, .. }) = (taken, &incoming) {
                    self.heard.keep(room.room_id(), &event_id, &sender, body);
                }
            }
            Verdict::Ignored => {}
        }
        self.read(room, &event_id);
    }

    /// The owner's reply or reaction to `post`, the post of a waiting call: its decision,
    /// through loopd, once.
    async fn answer(&self, room: &Room, post: OwnedEventId, incoming: &Incoming) {
        let answer = match incoming {
            Incoming::Text { body, .. } => answer_in_reply(body),
            Incoming::Reaction { key, .. } => answer_in_reaction(key),
        };
        let Some(answer) = answer else {
            if matches!(incoming, Incoming::Text { .. }) {
                say(
                    room,
                    "To answer a waiting call, reply `approve` or `deny <reason>`.",
                )
                .await;
            }
            return;
        };
        let posted = match self.waiting.answer(&post) {
            Found::Open(posted) => posted,
            Found::Decided(posted) => {
                say(room, &format!("{} is decided already.", posted.approval)).await;
                return;
            }
            Found::NotAPost => return,
        };
        if posted.room != room.room_id() {
            tracing::warn!(room = %room.room_id(), "an answer to a call posted in another room is ignored");
            self.waiting.reopen(&post);
            return;
        }
        match self
            .loopd
            .answer_approval(&posted.approval, &answer.to_api())
            .await
        {
            Ok(answered) => say(room, &answered_line(&answered.value)).await,
            Err(ClientError::Api { status: 404, .. }) => {
                let gone = format!(
                    "{} no longer waits (answered, timed out or void).",
                    posted.approval
                );
                say(room, &gone).await;
            }
            Err(error) => {
                tracing::warn!(%error, "loopd did not take an answer");
                say(
                    room,
                    &format!("The box could not take the answer ({error}); answer again."),
                )
                .await;
                self.waiting.reopen(&post);
            }
        }
    }

    /// Runs `message` as a task in `room`'s session; its turn is followed in the background
    /// (`turn::Follow`). Returns once loopd has the task.
    async fn task(&self, room: &Room, message: Message) {
        let (session, task_id) = match ids(room.room_id(), &message, &self.cfg) {
            Ok(ids) => ids,
            Err(why) => {
                tracing::error!(room = %room.room_id(), %why, "no task can be named for a message");
                return;
            }
        };
        if self.tasks.answered(&task_id) {
            // Read again after a crash; its answer was posted.
            return;
        }
        let handed = Handed {
            room: room.room_id().to_string(),
            session,
            task_id,
            text: message.text,
            overheard: self.heard.pending(room.room_id().as_str()),
        };
        self.hand(room, handed).await;
    }

    /// Hands `handed` to loopd (again, when it was before a restart) and follows its turn in
    /// the background.
    async fn hand(&self, room: &Room, handed: Handed) {
        if !self.tasks.follow(&handed.task_id) {
            return;
        }
        let again = self.tasks.was_handed(&handed.task_id);
        let request = TaskRequest {
            session: Some(handed.session.clone()),
            text: handed.text.clone(),
            task_id: Some(handed.task_id.clone()),
            overheard: handed.overheard.clone(),
        };
        let Some(stream) = self.submit(room, &request).await else {
            self.tasks.unfollow(&handed.task_id);
            return;
        };
        let (session, task_id) = (handed.session.clone(), handed.task_id.clone());
        tracing::info!(%session, task = %task_id, again, "a task was handed to loopd");
        let carried = handed.overheard.clone();
        if let Err(error) = self.tasks.hand(handed) {
            tracing::error!(%error, "cannot keep that a task was handed over");
        }
        if let Err(error) = self.heard.handed(room.room_id().as_str(), &carried) {
            tracing::error!(%error, "cannot forget what a task carried; the next task carries it again");
        }
        let follow = Follow {
            room: room.clone(),
            session,
            max_class: self.cfg.matrix.max_class,
            loopd: self.loopd.clone(),
            waiting: self.waiting.clone(),
            task_id,
            tasks: self.tasks.clone(),
            again,
        };
        tokio::spawn(follow.run(stream));
    }

    /// Follows again every task handed over before a restart and not answered.
    async fn follow_unanswered(&self) {
        for handed in self.tasks.unanswered() {
            let room = RoomId::parse(&handed.room)
                .ok()
                .and_then(|id| self.client.get_room(&id));
            match room {
                Some(room) => self.hand(&room, handed).await,
                None => {
                    tracing::warn!(room = %handed.room, "a task's room is gone; its answer cannot be posted")
                }
            }
        }
    }

    /// Hands `request` to loopd, trying again while loopd cannot be reached (the room is told
    /// once). `None`: loopd refused it, and the room was told why.
    async fn submit(
        &self,
        room: &Room,
        request: &TaskRequest,
    ) -> Option<boxctl::client::EventStream> {
        let mut told = false;
        let mut retry_ms = FIRST_RETRY_MS;
        loop {
            match self.loopd.submit_stream(request).await {
                Ok(stream) => return Some(stream),
                Err(ClientError::Api { status, error }) => {
                    let why = error.error.message;
                    tracing::warn!(status, %why, "loopd refused a task");
                    say(room, &format!("The box refused this task: {why}")).await;
                    return None;
                }
                Err(error) => {
                    tracing::warn!(%error, retry_ms, "loopd cannot be reached; trying again");
                    if !told {
                        say(room, RESTARTING).await;
                        told = true;
                    }
                    tokio::time::sleep(Duration::from_millis(retry_ms)).await;
                    retry_ms = (retry_ms * 2).min(MAX_RETRY_MS);
                }
            }
        }
    }
}

/// The session and task id of `message` in `room`.
fn ids(room: &RoomId, message: &Message, cfg: &Config) -> Result<(SessionId, TaskId), String> {
    let session = session_of(room, &cfg.rooms).map_err(|e| e.to_string())?;
    let task_id = task_id_of(&message.event).map_err(|e| e.to_string())?;
    Ok((session, task_id))
}
