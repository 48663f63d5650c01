#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A compaction asked for through the engine (`boxctl compact`): queued on the session's lane
//! behind its running turn, never racing it; a session with nothing to compact, or none at
//! all, is a clear error.

use crate::api::{ApiFailure, Backend};
use crate::meter::{Meter, system_clock};
use crate::tests::bed::{Bed, COMPACT_PHRASE, kinds, run_task};
use bxcore::{LogRecord, SessionId};
use proto::api::TaskRequest;
use std::sync::Arc;
use std::time::Duration;

/// The longest the test waits for anything.
const WAIT: Duration = Duration::from_secs(20);

/// A slow turn on "slow", compactions answered with a carry, the rest `done`.
fn engine_script() -> String {
    format!(
        r#"default_reply = "done"
[[rule]]
when_contains = "{COMPACT_PHRASE}"
reply = "CARRY: a slow task and a quick one"
[[rule]]
when_contains = "slow"
delay_ms = 300
reply = "slowly done"
"#
    )
}

#[test]
fn a_compaction_asked_for_waits_for_the_running_turn_and_begins_an_epoch() {
    let bed = Bed::new(&engine_script());
    let engine = bed.engine(&Arc::new(Meter::load(&bed.cfg, system_clock()).unwrap()));
    let id = SessionId::new("s").unwrap();
    let answer = bed.fake.rt.block_on(async {
        run_task(&engine, &id, "quick").await;
        // The slow turn is running (acknowledged) when the compaction is asked for.
        let slow = engine.submit(TaskRequest {
            session: Some(id.clone()),
            text: "slow".into(),
            task_id: None,
            overheard: Vec::new(),
        });
        let _running = tokio::time::timeout(WAIT, slow).await.unwrap().unwrap();
        let answer = tokio::time::timeout(WAIT, engine.compact(&id))
            .await
            .unwrap();
        engine.shutdown(20_000).await;
        answer
    });
    let answer = answer.unwrap();
    assert_eq!(answer.epoch, 1);
    assert_eq!(answer.model_failure, None);
    let session = bed.session("s");
    assert_eq!(
        kinds(&session)[5..],
        ["user", "assistant", "turn_end", "epoch_start"],
        "after the running turn, not in it"
    );
    assert!(matches!(
        session.records().last(),
        Some(LogRecord::EpochStart { carry, .. })
            if crate::compact::owner_words::split(carry)
                == ("CARRY: a slow task and a quick one", vec!["quick".into(), "slow".into()])
    ));
}

#[test]
fn a_compaction_of_nothing_or_of_no_session_says_so() {
    let bed = Bed::new(&engine_script());
    let engine = bed.engine(&Arc::new(Meter::load(&bed.cfg, system_clock()).unwrap()));
    drop(bed.made("empty"));
    let (empty, unknown) = bed.fake.rt.block_on(async {
        let empty = engine.compact(&SessionId::new("empty").unwrap()).await;
        let unknown = engine.compact(&SessionId::new("nope").unwrap()).await;
        engine.shutdown(20_000).await;
        (empty, unknown)
    });
    match empty {
        Err(ApiFailure::BadRequest(why)) => assert!(why.contains("nothing to compact"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(unknown, Err(ApiFailure::NotFound(_))),
        "{unknown:?}"
    );
    assert!(bed.bodies_with(COMPACT_PHRASE).is_empty());
}
