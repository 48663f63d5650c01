#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What comes back by itself: a schedule's result in its room, and every message once after
//! chatd is killed while a task runs.

use super::*;

#[test]
fn a_schedules_result_is_posted_to_the_room_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let Some((synapse, bot)) = homeserver(dir.path()) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // The room comes first: the schedule names it.
        let owner = sign_in(&synapse.url, "owner").await;
        let room_id = room_with(&owner, vec![bot.clone()]).await;
        let stack = Stack::start(StackOptions {
            script: SCRIPT.to_string(),
            loopd_toml: format!(
                "[[schedules]]\nname = \"report\"\nevery = \"24h\"\ntask = \"report\"\n\
                 notify = \"always\"\nnotify_to = \"matrix:{room_id}\"\n"
            ),
            ..StackOptions::default()
        })
        .unwrap();
        let _chatd = start_chatd(dir.path(), &synapse, &bot, &stack.socket);
        wait_membership(&owner, &room_id, &bot, MembershipState::Join).await;

        let out = stack.boxctl(&["schedule", "run", "report"]);
        assert_eq!(out.status.code(), Some(0), "{}", e2e::show(&out));
        let said = wait_messages_from(&owner, &room_id, &bot, 1).await;
        assert!(
            said[0].starts_with('['),
            "the session's name first: {said:?}"
        );
        assert!(said[0].ends_with("] The answer is 42."), "{said:?}");
    });
}

/// Each task takes a while, so chatd can be killed while one runs.
const SLOW_SCRIPT: &str = r#"
default_reply = "Hmm."
[[rule]]
when_contains = "alpha"
delay_ms = 1500
reply = "Answer alpha."
[[rule]]
when_contains = "beta"
delay_ms = 300
reply = "Answer beta."
[[rule]]
when_contains = "gamma"
delay_ms = 300
reply = "Answer gamma."
[[rule]]
when_contains = "delta"
reply = "Answer delta."
"#;

/// Waits (at most [`WAIT_MS`]) until `stack`'s `session` log holds `text`.
fn wait_log_holds(stack: &Stack, session: &str, text: &str) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while !stack.log_text(session).contains(text) {
        assert!(
            Instant::now() < deadline,
            "{session}'s log never held {text:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn chatd_killed_while_a_task_runs_runs_no_message_twice_and_answers_each_once() {
    let dir = tempfile::tempdir().unwrap();
    let Some((synapse, bot)) = homeserver(dir.path()) else {
        return;
    };
    let stack = Stack::start(StackOptions {
        script: SLOW_SCRIPT.to_string(),
        ..StackOptions::default()
    })
    .unwrap();
    let chatd = start_chatd(dir.path(), &synapse, &bot, &stack.socket);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let owner = sign_in(&synapse.url, "owner").await;
        let room_id = room_with(&owner, vec![bot.clone()]).await;
        wait_membership(&owner, &room_id, &bot, MembershipState::Join).await;
        let session = session_of(&room_id, &[]).unwrap();
        let room = owner.get_room(&room_id).unwrap();
        for text in ["task alpha", "task beta", "task gamma"] {
            room.send(RoomMessageEventContent::text_plain(text))
                .await
                .unwrap();
        }
        // loopd has the first task and runs it: chatd dies (SIGKILL) and comes back.
        wait_log_holds(&stack, session.as_str(), "task alpha");
        drop(chatd);
        let _chatd = start_chatd(dir.path(), &synapse, &bot, &stack.socket);
        wait_messages_from(&owner, &room_id, &bot, 3).await;
        // A last task, answered after the others: any answer posted twice would be in by now.
        room.send(RoomMessageEventContent::text_plain("task delta"))
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        let said = loop {
            let said = wait_messages_from(&owner, &room_id, &bot, 4).await;
            if said.iter().any(|s| s == "Answer delta.") {
                break said;
            }
            assert!(Instant::now() < deadline, "no answer to delta: {said:?}");
        };
        let mut sorted = said.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            [
                "Answer alpha.",
                "Answer beta.",
                "Answer delta.",
                "Answer gamma."
            ],
            "each answer once: {said:?}"
        );
        let log = stack.log_text(session.as_str());
        assert_eq!(log.matches("\"type\":\"user\"").count(), 4, "{log}");
        for text in ["task alpha", "task beta", "task gamma", "task delta"] {
            assert_eq!(log.matches(text).count(), 1, "{text} once: {log}");
        }
    });
}

#[test]
fn while_loopd_is_down_the_room_is_told_once_and_the_task_runs_when_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let Some((synapse, bot)) = homeserver(dir.path()) else {
        return;
    };
    let (mut stack, _) = plain_stack(dir.path());
    let _chatd = start_chatd(dir.path(), &synapse, &bot, &stack.socket);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let owner = sign_in(&synapse.url, "owner").await;
        let room_id = room_with(&owner, vec![bot.clone()]).await;
        wait_membership(&owner, &room_id, &bot, MembershipState::Join).await;
        // loopd stops (killed); the owner writes meanwhile.
        drop(stack.loopd.take());
        let room = owner.get_room(&room_id).unwrap();
        room.send(RoomMessageEventContent::text_plain("are you there?"))
            .await
            .unwrap();
        let said = wait_messages_from(&owner, &room_id, &bot, 1).await;
        assert_eq!(said, [chatd::channel::RESTARTING]);
        stack.start_loopd("").unwrap();
        let said = wait_messages_from(&owner, &room_id, &bot, 2).await;
        assert_eq!(
            said[1], "The answer is 42.",
            "told once, then answered: {said:?}"
        );
        let session = session_of(&room_id, &[]).unwrap();
        let log = stack.log_text(session.as_str());
        assert_eq!(log.matches("are you there?").count(), 1, "{log}");
    });
}

#[test]
fn messages_past_what_one_sync_returns_are_read_back_and_none_is_lost() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    /// More than the homeserver's timeline limit for one sync (Synapse: 10).
    const MESSAGES: usize = 14;
    let dir = tempfile::tempdir().unwrap();
    let Some((synapse, bot)) = homeserver(dir.path()) else {
        return;
    };
    let (stack, _) = plain_stack(dir.path());
    let chatd = start_chatd(dir.path(), &synapse, &bot, &stack.socket);
    let pid = Pid::from_raw(i32::try_from(chatd.pid()).unwrap());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let owner = sign_in(&synapse.url, "owner").await;
        let room_id = room_with(&owner, vec![bot.clone()]).await;
        wait_membership(&owner, &room_id, &bot, MembershipState::Join).await;
        let room = owner.get_room(&room_id).unwrap();
        room.send(RoomMessageEventContent::text_plain("task 0"))
            .await
            .unwrap();
        wait_messages_from(&owner, &room_id, &bot, 1).await;
        // chatd stops reading (SIGSTOP) while the owner writes more than one sync returns.
        kill(pid, Signal::SIGSTOP).unwrap();
        for n in 1..MESSAGES {
            room.send(RoomMessageEventContent::text_plain(format!("task {n}")))
                .await
                .unwrap();
        }
        kill(pid, Signal::SIGCONT).unwrap();
        wait_messages_from(&owner, &room_id, &bot, MESSAGES).await;
        let log = stack.log_text(session_of(&room_id, &[]).unwrap().as_str());
        assert_eq!(log.matches("\"type\":\"user\"").count(), MESSAGES, "{log}");
        for n in 0..MESSAGES {
            let content = format!("\"content\":\"task {n}\"");
            assert_eq!(log.matches(&content).count(), 1, "task {n} once: {log}");
        }
    });
    drop(chatd);
}
