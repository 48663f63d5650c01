#![allow(clippy::unwrap_used, clippy::expect_used)]
//! chatd against a real homeserver (Synapse on loopback): the owner's message in a room becomes
//! a task and its answer comes back; a stranger's message in the same room is never a task,
//! and a stranger's invitation is refused; a call waiting for approval is posted, a stranger's
//! answer to it is ignored and the owner's decides it once. Owner and stranger are matrix-sdk
//! clients, as Element would be.

mod answers;
mod decisions;
mod rooms;
mod survival;

use chatd::names::session_of;
use e2e::synapse::{SERVER_NAME, Synapse};
use e2e::{Running, Stack, StackOptions, binary};
use matrix_sdk::config::SyncSettings;
use matrix_sdk::room::MessagesOptions;
use matrix_sdk::ruma::api::client::room::create_room;
use matrix_sdk::ruma::events::InitialStateEvent;
use matrix_sdk::ruma::events::reaction::ReactionEventContent;
use matrix_sdk::ruma::events::relation::{Annotation, InReplyTo, Reply};
use matrix_sdk::ruma::events::room::encryption::RoomEncryptionEventContent;
use matrix_sdk::ruma::events::room::member::MembershipState;
use matrix_sdk::ruma::events::room::message::{
    Relation, RoomMessageEventContent, SyncRoomMessageEvent,
};
use matrix_sdk::ruma::events::{AnySyncMessageLikeEvent, AnySyncTimelineEvent};
use matrix_sdk::ruma::{OwnedEventId, OwnedRoomId, OwnedUserId, RoomId, UserId};
use matrix_sdk::{Client, Room};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Every account's password on the test's homeserver.
pub(super) const PASSWORD: &str = "correct horse battery staple";
/// What the model answers every task in [`plain_stack`].
pub(super) const SCRIPT: &str = r#"default_reply = "The answer is 42.""#;
/// The longest a test waits for what it expects, in milliseconds.
pub(super) const WAIT_MS: u64 = 60_000;
/// How long one sync of a test's client waits for news, in milliseconds.
pub(super) const SYNC_MS: u64 = 300;

/// A homeserver with three accounts, loopd on fakellama (and brokerd, for some tests), and
/// chatd between them.
pub(super) struct Box {
    pub(super) _dir: tempfile::TempDir,
    pub(super) synapse: Synapse,
    pub(super) stack: Stack,
    pub(super) _chatd: Running,
    pub(super) _brokerd: Option<Running>,
    pub(super) bot: OwnedUserId,
}

/// Synapse in `dir` with the bot, the owner and a stranger registered; `None` when the test
/// is skipped for want of Synapse.
pub(super) fn homeserver(dir: &Path) -> Option<(Synapse, OwnedUserId)> {
    let synapse = Synapse::start_or_skip(&dir.join("synapse"))?;
    let bot = UserId::parse(synapse.register("box", PASSWORD)).unwrap();
    synapse.register("owner", PASSWORD);
    synapse.register("stranger", PASSWORD);
    Some((synapse, bot))
}

/// chatd for `bot` on `synapse`, obeying the owner, using loopd at `socket`, its state and
/// config in `dir`.
pub(super) fn start_chatd(dir: &Path, synapse: &Synapse, bot: &UserId, socket: &Path) -> Running {
    start_chatd_with(dir, synapse, bot, socket, "")
}

/// [`start_chatd`] with `matrix_toml` at the end of chatd's config (after `[matrix]`).
pub(super) fn start_chatd_with(
    dir: &Path,
    synapse: &Synapse,
    bot: &UserId,
    socket: &Path,
    matrix_toml: &str,
) -> Running {
    let password = dir.join("bot-password");
    std::fs::write(&password, format!("{PASSWORD}\n")).unwrap();
    let config = dir.join("chatd.toml");
    std::fs::write(
        &config,
        format!(
            "loopd_socket = {socket:?}\nstate_dir = {:?}\n[log]\nlevel = \"info\"\n[matrix]\n\
             homeserver = {:?}\nuser = \"{bot}\"\npassword_file = {password:?}\n\
             owners = [\"@owner:{SERVER_NAME}\"]\nsync_timeout_ms = 1000\n{matrix_toml}",
            dir.join("chatd"),
            synapse.url,
        ),
    )
    .unwrap();
    let mut command = Command::new(binary("chatd"));
    command.arg("--config").arg(&config);
    Running::start_logged(command, &dir.join("chatd.log")).unwrap()
}

/// The box, its stack made by `stack` in the test's directory (with the brokerd it started, if
/// any); `None` when the test is skipped for want of Synapse.
pub(super) fn start(stack: impl FnOnce(&Path) -> (Stack, Option<Running>)) -> Option<Box> {
    let dir = tempfile::tempdir().unwrap();
    let (synapse, bot) = homeserver(dir.path())?;
    let (stack, brokerd) = stack(dir.path());
    let chatd = start_chatd(dir.path(), &synapse, &bot, &stack.socket);
    Some(Box {
        _dir: dir,
        synapse,
        stack,
        _chatd: chatd,
        _brokerd: brokerd,
        bot,
    })
}

/// fakellama answering [`SCRIPT`], and loopd with its fake tools.
pub(super) fn plain_stack(_: &Path) -> (Stack, Option<Running>) {
    let stack = Stack::start(StackOptions {
        script: SCRIPT.to_string(),
        ..StackOptions::default()
    })
    .unwrap();
    (stack, None)
}

/// `name` signed in, its first sync done.
pub(super) async fn sign_in(homeserver: &str, name: &str) -> Client {
    let client = Client::builder()
        .homeserver_url(homeserver)
        .build()
        .await
        .unwrap();
    client
        .matrix_auth()
        .login_username(name, PASSWORD)
        .send()
        .await
        .unwrap();
    client.sync_once(SyncSettings::default()).await.unwrap();
    client
}

pub(super) async fn sync(client: &Client) {
    client
        .sync_once(SyncSettings::default().timeout(Duration::from_millis(SYNC_MS)))
        .await
        .unwrap();
}

/// Waits (at most [`WAIT_MS`]) until `client` sees `user`'s membership of `room` be `want`.
pub(super) async fn wait_membership(
    client: &Client,
    room: &RoomId,
    user: &UserId,
    want: MembershipState,
) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    loop {
        sync(client).await;
        if let Some(room) = client.get_room(room)
            && let Ok(Some(member)) = room.get_member_no_sync(user).await
            && *member.membership() == want
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{user} never reached {want} in {room}"
        );
    }
}

/// The text messages `sender` posted in `room`, oldest first, with their event ids.
pub(super) async fn posts_from(room: &Room, sender: &UserId) -> Vec<(String, OwnedEventId)> {
    let mut options = MessagesOptions::backward();
    // Every message a test posts fits one page.
    options.limit = 200u32.into();
    let page = room.messages(options).await.unwrap();
    let mut found: Vec<_> = page
        .chunk
        .iter()
        .filter_map(|event| match event.raw().deserialize() {
            Ok(AnySyncTimelineEvent::MessageLike(AnySyncMessageLikeEvent::RoomMessage(
                SyncRoomMessageEvent::Original(m),
            ))) if m.sender == sender => Some((m.content.body().to_owned(), m.event_id)),
            _ => None,
        })
        .collect();
    found.reverse();
    found
}

/// Waits (at most [`WAIT_MS`]) for `count` messages from `sender` in `room`; returns them all.
pub(super) async fn wait_posts_from(
    client: &Client,
    room: &RoomId,
    sender: &UserId,
    count: usize,
) -> Vec<(String, OwnedEventId)> {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    loop {
        sync(client).await;
        let posts = posts_from(&client.get_room(room).unwrap(), sender).await;
        if posts.len() >= count {
            return posts;
        }
        assert!(
            Instant::now() < deadline,
            "{sender} posted {posts:?} in {room}, not {count} messages"
        );
    }
}

/// [`wait_posts_from`], the bodies only.
pub(super) async fn wait_messages_from(
    client: &Client,
    room: &RoomId,
    sender: &UserId,
    count: usize,
) -> Vec<String> {
    let posts = wait_posts_from(client, room, sender, count).await;
    posts.into_iter().map(|(body, _)| body).collect()
}

/// A room `creator` makes, inviting `invite`.
pub(super) async fn room_with(creator: &Client, invite: Vec<OwnedUserId>) -> OwnedRoomId {
    let mut request = create_room::v3::Request::new();
    request.invite = invite;
    request.name = Some("the box".into());
    creator
        .create_room(request)
        .await
        .unwrap()
        .room_id()
        .to_owned()
}

/// The owner's room with the bot and the stranger in it: (owner, stranger, room).
pub(super) async fn shared_room(appliance: &Box) -> (Client, Client, OwnedRoomId) {
    let url = appliance.synapse.url.clone();
    let owner = sign_in(&url, "owner").await;
    let stranger = sign_in(&url, "stranger").await;
    let stranger_id = stranger.user_id().unwrap().to_owned();
    let room_id = room_with(&owner, vec![appliance.bot.clone(), stranger_id]).await;
    stranger.join_room_by_id(&room_id).await.unwrap();
    wait_membership(&owner, &room_id, &appliance.bot, MembershipState::Join).await;
    (owner, stranger, room_id)
}

/// `text` as a reply to `to`.
pub(super) fn reply_to(to: &OwnedEventId, text: &str) -> RoomMessageEventContent {
    let mut content = RoomMessageEventContent::text_plain(text);
    content.relates_to = Some(Relation::Reply(Reply::new(InReplyTo::new(to.clone()))));
    content
}
