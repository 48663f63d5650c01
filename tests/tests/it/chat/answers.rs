#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What the room sees of a turn: the bot typing while it runs, and an answer too long for one
//! message posted cut, with the whole of it attached as `answer.txt`.

use super::*;
use matrix_sdk::ruma::events::room::message::{FileMessageEventContent, MessageType};
use matrix_sdk::ruma::events::typing::SyncTypingEvent;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes of the long answer: more than one message takes (32 KiB).
const LONG_ANSWER_BYTES: usize = 40_000;

/// The long answer: lines of 79 letters, so the stand-in tokeniser makes ~4 bytes a token.
fn long_answer() -> String {
    let line = format!("{}\n", "abcd".repeat(20).split_at(79).0);
    line.repeat(LONG_ANSWER_BYTES / line.len())
}

/// The file `sender` attached in `room`, if any.
async fn attached_file(room: &Room, sender: &UserId) -> Option<FileMessageEventContent> {
    let mut options = MessagesOptions::backward();
    options.limit = 200u32.into();
    let page = room.messages(options).await.unwrap();
    page.chunk
        .iter()
        .find_map(|event| match event.raw().deserialize() {
            Ok(AnySyncTimelineEvent::MessageLike(AnySyncMessageLikeEvent::RoomMessage(
                SyncRoomMessageEvent::Original(m),
            ))) if m.sender == sender => match m.content.msgtype {
                MessageType::File(file) => Some(file),
                _ => None,
            },
            _ => None,
        })
}

#[test]
fn the_bot_types_while_a_turn_runs_and_a_long_answer_comes_cut_with_the_whole_as_a_file() {
    let answer = long_answer();
    let script = format!(
        "[[rule]]\nwhen_contains = \"write it all\"\ndelay_ms = 1500\nreply = {answer:?}\n"
    );
    let Some(appliance) = start(|_| {
        let stack = Stack::start(StackOptions {
            script,
            loopd_toml: "[llama]\nmax_answer_tokens = 16000\n".into(),
            fakellama_args: vec!["--n-ctx".into(), "32768".into()],
            ..StackOptions::default()
        })
        .unwrap();
        (stack, None)
    }) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let bot = appliance.bot.clone();
        let owner = sign_in(&appliance.synapse.url, "owner").await;
        let room_id = room_with(&owner, vec![bot.clone()]).await;
        wait_membership(&owner, &room_id, &bot, MembershipState::Join).await;
        let typed = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&typed);
        let typist = bot.clone();
        owner.add_event_handler(move |event: SyncTypingEvent| {
            let seen = Arc::clone(&seen);
            let typist = typist.clone();
            async move {
                if event.content.user_ids.contains(&typist) {
                    seen.store(true, Ordering::SeqCst);
                }
            }
        });
        let room = owner.get_room(&room_id).unwrap();
        room.send(RoomMessageEventContent::text_plain("write it all down"))
            .await
            .unwrap();

        let posts = wait_posts_from(&owner, &room_id, &bot, 2).await;
        assert!(
            typed.load(Ordering::SeqCst),
            "the bot never showed it typing"
        );
        let (text, _) = &posts[0];
        assert!(text.len() <= 32 * 1024, "{} bytes", text.len());
        assert!(answer.starts_with(text.split('…').next().unwrap().trim_end()));
        assert!(
            text.ends_with("(cut; the whole answer is attached as answer.txt)"),
            "{}",
            &text[text.len() - 100..]
        );
        assert_eq!(posts[1].0, "answer.txt");
        let file = attached_file(&room, &bot).await.expect("a file");
        let whole = owner.media().get_file(&file, false).await.unwrap().unwrap();
        assert_eq!(
            String::from_utf8(whole).unwrap().trim_end(),
            answer.trim_end()
        );
    });
}
