#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A slot that more than one session uses is saved to its holder's file after each turn, once
//! the turn's stream has ended and while the turn still holds the slot: the next session's
//! switch then only restores (`docs/kv.md`, "When the save happens"). A turn that ends without
//! its slot (stopped while it waited for the owner) neither records nor saves it.

use super::kv_switch::{
    alternate, at, bed, bed_scripted, calls, engine, engine_over, engine_with,
    every_later_turn_warm, run, script, stop, wait_for_saves,
};
use crate::api::Backend;
use crate::kv::KV_TEMP_SUFFIX;
use crate::tests::bed::TASK_WAIT;
use crate::tools::tests::asking::AskingPort;
use bxcore::{SessionId, TurnEvent};
use std::sync::Arc;

#[test]
fn a_slot_other_sessions_use_is_saved_after_each_turn_so_a_switch_only_restores() {
    let (bed, dir) = bed(true);
    let engine = engine(&bed, true);
    let kv = engine.models().kv().unwrap();
    // One session alone on its slot: no switch, so no save is worth its write.
    run(&bed, &engine, "a", "task 0 of a");
    run(&bed, &engine, "a", "task 1 of a");
    assert_eq!(kv.status().saves, 0, "{:?}", kv.status());
    // b takes the slot: a's cache is saved at that switch, the first on this slot.
    run(&bed, &engine, "b", "task 0 of b");
    // From now on the slot is shared: b's cache goes to its file after its turn, before any
    // other session asks for the slot.
    let status = wait_for_saves(&bed, &engine, |s| s.saves_after_turn == 1);
    assert_eq!(
        status.saves, 2,
        "a at the switch, b after its turn: {status:?}"
    );
    assert!(at(&dir, "b", ".bin").is_file());
    // a comes back: b's file holds the slot already, so the switch saves nothing, and only
    // restores a's.
    run(&bed, &engine, "a", "task 2 of a");
    let status = wait_for_saves(&bed, &engine, |s| s.saves_after_turn == 2);
    assert_eq!(
        status.saves - status.saves_after_turn,
        1,
        "no save at the second switch: {status:?}"
    );
    assert_eq!(status.restores, 1, "{status:?}");
    run(&bed, &engine, "b", "task 1 of b");
    for id in ["a", "b"] {
        assert!(
            every_later_turn_warm(&bed, id),
            "{id}: {:?}",
            calls(&bed, id)
        );
    }
    // Shutdown saves no holder whose file holds it already.
    wait_for_saves(&bed, &engine, |s| s.saves_after_turn == 3);
    let saves = kv.status().saves;
    stop(&bed, &engine, true);
    assert_eq!(kv.status().saves, saves);

    // With `save_after_turn` off, every save is at a switch, on the next turn's path.
    let (bed, _) = self::bed(true);
    let engine = engine_with(&bed, true, |cfg| cfg.kv.save_after_turn = false);
    let kv = engine.models().kv().unwrap();
    alternate(&bed, &engine, 2);
    let status = kv.status();
    assert_eq!(status.saves, 3, "{status:?}");
    assert_eq!(status.saves_after_turn, 0, "{status:?}");
    stop(&bed, &engine, false);
}

#[test]
fn the_save_after_a_turn_is_off_its_path_its_stream_ends_first() {
    let (bed, dir) = bed(true);
    let engine = engine(&bed, true);
    let kv = engine.models().kv().unwrap();
    run(&bed, &engine, "a", "task 0 of a");
    run(&bed, &engine, "b", "task 0 of b");
    wait_for_saves(&bed, &engine, |s| s.saves_after_turn == 1);
    // a's save after its next turn writes into a FIFO the server blocks on until it is read.
    let temp = at(&dir, "a", KV_TEMP_SUFFIX);
    let made = std::process::Command::new("mkfifo")
        .arg(&temp)
        .status()
        .unwrap();
    assert!(made.success());
    let a = SessionId::new("a").unwrap();
    // The whole stream, to its end, while the save waits.
    let streamed = bed.fake.rt.block_on(async {
        let mut submitted = engine
            .submit(proto::api::TaskRequest {
                session: Some(a.clone()),
                text: "task 1 of a".into(),
                task_id: None,
                overheard: Vec::new(),
            })
            .await
            .unwrap();
        tokio::time::timeout(crate::tests::bed::TASK_WAIT, async {
            let mut ended = false;
            while let Some(event) = submitted.events.recv().await {
                ended |= matches!(event, bxcore::TurnEvent::Ended { .. });
            }
            ended
        })
        .await
    });
    let saves_then = kv.status().saves_after_turn;
    // The server's write goes on once the FIFO is read (whatever the test finds above).
    let read = std::thread::spawn(move || std::fs::read(&temp).unwrap());
    assert_eq!(streamed, Ok(true), "the stream ended while the save waited");
    assert_eq!(saves_then, 1, "the save came after the stream's end");
    let status = wait_for_saves(&bed, &engine, |s| s.saves_after_turn == 2);
    assert!(!read.join().unwrap().is_empty(), "{status:?}");
    stop(&bed, &engine, false);
}

#[test]
fn a_turn_stopped_while_it_waits_for_the_owner_neither_records_nor_saves_the_slot() {
    // "save" calls `echo`, which the port asks the owner about.
    let script = format!(
        "{}[[rule]]\nwhen_role = \"user\"\nwhen_contains = \"save\"\ntool_calls = [{{ name = \"call_tool\", arguments = \"{{\\\"name\\\":\\\"echo\\\",\\\"arguments\\\":{{\\\"text\\\":\\\"note\\\"}}}}\" }}]\n",
        script()
    );
    let (bed, _) = bed_scripted(true, &script);
    let engine = engine_over(&bed, Arc::new(AskingPort::new()), true, |_| {});
    let kv = engine.models().kv().unwrap();
    alternate(&bed, &engine, 1);
    wait_for_saves(&bed, &engine, |s| s.saves_after_turn == 1);
    let a = SessionId::new("a").unwrap();
    bed.fake.rt.block_on(async {
        let mut submitted = engine
            .submit(proto::api::TaskRequest {
                session: Some(a.clone()),
                text: "save the note".into(),
                task_id: None,
                overheard: Vec::new(),
            })
            .await
            .unwrap();
        // a waits for the owner, its slot given back; b takes it and ends, saved after its turn.
        loop {
            let event = tokio::time::timeout(TASK_WAIT, submitted.events.recv()).await;
            match event.unwrap().unwrap() {
                TurnEvent::ApprovalRequested { .. } => break,
                TurnEvent::Ended { end, .. } => panic!("ended without asking: {end:?}"),
                _ => {}
            }
        }
        crate::tests::bed::run_task(&engine, &SessionId::new("b").unwrap(), "task 1 of b").await;
        // Stopped while it waits: it cannot take the slot again, and ends without it.
        engine.cancel(&a).unwrap();
        while tokio::time::timeout(TASK_WAIT, submitted.events.recv())
            .await
            .unwrap()
            .is_some()
        {}
    });
    // a's next task runs after the stopped one is wholly done (one lane): the slot holds b,
    // so a's file (saved when b took the slot) is restored, and a's last prompt is cached.
    let restores = kv.status().restores;
    run(&bed, &engine, "a", "task 1 of a");
    assert_eq!(kv.status().restores, restores + 1, "{:?}", kv.status());
    assert!(every_later_turn_warm(&bed, "a"), "{:?}", calls(&bed, "a"));
    stop(&bed, &engine, false);
}
