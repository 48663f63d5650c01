#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A call waiting for approval, posted to the room and decided there by the owner alone, also
//! across restarts of chatd.

use super::*;
use crate::approvals::{answer, pending, reply, write};
use crate::injection::common::{stack_with_brokerd, start_brokerd};

#[test]
fn a_waiting_call_is_posted_and_only_the_owners_answer_decides_it_once() {
    let mut out = PathBuf::new();
    let Some(appliance) = start(|dir| {
        out = dir.join("out");
        std::fs::create_dir(&out).unwrap();
        let grants =
            format!("[[grants]]\ntool = \"write_file\"\npaths = [{out:?}]\napprove = \"always\"\n");
        let brokerd = start_brokerd(dir, &grants);
        let steps = [
            ("user", "save", write(&out.join("a.txt"), "one")),
            ("tool", "a.txt", reply("Saved it.")),
        ];
        (stack_with_brokerd(dir, &steps, ""), Some(brokerd))
    }) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let (owner, stranger, room_id) = shared_room(&appliance).await;
        let bot = &appliance.bot;
        let room = owner.get_room(&room_id).unwrap();
        let task = format!("save a note into {}", out.display());
        room.send(RoomMessageEventContent::text_plain(task))
            .await
            .unwrap();

        let posts = wait_posts_from(&owner, &room_id, bot, 1).await;
        let (request, post) = &posts[0];
        assert!(request.starts_with("Approval needed ("), "{request}");
        assert!(request.contains("write_file"), "{request}");
        assert!(request.contains("a.txt"), "{request}");
        assert!(!out.join("a.txt").exists(), "nothing runs before an answer");

        // The stranger answers first, by a reply and by a reaction: neither counts.
        let theirs = stranger.get_room(&room_id).unwrap();
        theirs.send(reply_to(post, "deny no way")).await.unwrap();
        let thumbs_down = Annotation::new(post.clone(), "👎".into());
        theirs
            .send(ReactionEventContent::new(thumbs_down))
            .await
            .unwrap();
        // The owner's answer decides; a second answer is told the call is decided, and is no
        // task of its own.
        room.send(reply_to(post, "approve")).await.unwrap();
        room.send(reply_to(post, "approve")).await.unwrap();

        let said = wait_messages_from(&owner, &room_id, bot, 4).await;
        assert!(said[1].starts_with("approved "), "{said:?}");
        // The turn's answer and the word on the second answer come in either order.
        let answer = said[2..]
            .iter()
            .find(|s| s.ends_with("\nSaved it."))
            .expect("the answer");
        assert!(
            answer.starts_with("⚙ call_tool("),
            "a line for the call: {answer}"
        );
        assert!(
            said[2..].iter().any(|s| s.ends_with("is decided already.")),
            "{said:?}"
        );
        assert_eq!(std::fs::read_to_string(out.join("a.txt")).unwrap(), "one");
        let log = appliance
            .stack
            .log_text(session_of(&room_id, &[]).unwrap().as_str());
        assert_eq!(
            log.matches("\"type\":\"approval_decided\"").count(),
            1,
            "{log}"
        );
        assert!(log.contains("\"decision\":\"approved\""), "{log}");
    });
}

/// Waits (at most [`WAIT_MS`]) for a call of `session` other than `but` to wait; its id.
fn wait_for_call_but(stack: &Stack, session: &str, but: &str) -> String {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    loop {
        let waiting = pending(stack);
        if let Some(found) = waiting
            .iter()
            .find(|p| p.session.as_str() == session && p.id.as_str() != but)
        {
            return found.id.to_string();
        }
        assert!(Instant::now() < deadline, "no second call: {waiting:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn calls_asked_while_chatd_was_down_are_posted_and_a_post_from_before_a_restart_still_decides() {
    let dir = tempfile::tempdir().unwrap();
    let Some((synapse, bot)) = homeserver(dir.path()) else {
        return;
    };
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let grants =
        format!("[[grants]]\ntool = \"write_file\"\npaths = [{out:?}]\napprove = \"always\"\n");
    let _brokerd = start_brokerd(dir.path(), &grants);
    let steps = [
        ("user", "save", write(&out.join("a.txt"), "one")),
        ("tool", "a.txt", write(&out.join("b.txt"), "two")),
        ("tool", "b.txt", reply("Saved both.")),
    ];
    let stack = stack_with_brokerd(dir.path(), &steps, "");
    let chatd = start_chatd(dir.path(), &synapse, &bot, &stack.socket);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let owner = sign_in(&synapse.url, "owner").await;
        let room_id = room_with(&owner, vec![bot.clone()]).await;
        wait_membership(&owner, &room_id, &bot, MembershipState::Join).await;
        let session = session_of(&room_id, &[]).unwrap();
        let room = owner.get_room(&room_id).unwrap();
        let task = format!("save two notes into {}", out.display());
        room.send(RoomMessageEventContent::text_plain(task))
            .await
            .unwrap();
        let first = wait_posts_from(&owner, &room_id, &bot, 1).await;
        assert!(first[0].0.contains("a.txt"), "{first:?}");

        // chatd dies; the first call is approved on the box, and the second is asked while
        // chatd is down. Back, chatd posts it.
        drop(chatd);
        let first_id = pending(&stack)[0].id.to_string();
        answer(&stack, &["approve", &first_id]);
        wait_for_call_but(&stack, session.as_str(), &first_id);
        let chatd = start_chatd(dir.path(), &synapse, &bot, &stack.socket);
        let posts = wait_posts_from(&owner, &room_id, &bot, 2).await;
        let (second, post) = &posts[1];
        assert!(second.starts_with("Approval needed ("), "{posts:?}");
        assert!(second.contains("b.txt"), "{posts:?}");

        // chatd dies again; the owner answers the post made before, and chatd, back, takes it.
        drop(chatd);
        room.send(reply_to(post, "approve")).await.unwrap();
        let _chatd = start_chatd(dir.path(), &synapse, &bot, &stack.socket);
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        let said = loop {
            let said = wait_messages_from(&owner, &room_id, &bot, 3).await;
            if said.iter().any(|s| s.ends_with("Saved both.")) {
                break said;
            }
            assert!(Instant::now() < deadline, "no answer: {said:?}");
        };
        let asked = said
            .iter()
            .filter(|s| s.starts_with("Approval needed ("))
            .count();
        assert_eq!(asked, 2, "each call posted once: {said:?}");
        assert_eq!(std::fs::read_to_string(out.join("b.txt")).unwrap(), "two");
        let log = stack.log_text(session.as_str());
        assert_eq!(log.matches("\"decision\":\"approved\"").count(), 2, "{log}");
    });
}
