#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A call waiting for approval, posted to the room and decided there by the owner alone.

use super::*;
use crate::approvals::{reply, write};
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
