#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Which turns an undo takes (`engine::undo`): `--turns N` counts the turns not undone yet, so
//! a second undo of one turn undoes the turn before the first's (an editor's undo, not the same
//! turn again); a count past what is left is refused saying how many are; `from_turn` undoes
//! from that turn on, and a turn past the last is refused, as is a count with a turn.

use crate::api::{ApiFailure, Backend};
use crate::tests::bed::{Bed, run_task};
use crate::tools::{PortRefusal, ToolPort};
use bxcore::SessionId;
use proto::{ToolRequest, ToolResponse, UndoAnswer, UndoRequest, UndoTurns};
use std::sync::{Arc, Mutex};

/// A port that answers every undo with no file, remembering from which turn it was asked.
#[derive(Default)]
struct Undos {
    asked: Mutex<Vec<u64>>,
}

impl ToolPort for Undos {
    fn call(&self, _: &ToolRequest) -> ToolResponse {
        ToolResponse::denied(bxcore::DenyReason::NoGrant, None)
    }

    fn undo(&self, request: &UndoRequest) -> Result<UndoAnswer, PortRefusal> {
        self.asked.lock().unwrap().push(request.from_turn);
        Ok(UndoAnswer {
            session: request.session.clone(),
            turns: Vec::new(),
            files: Vec::new(),
            dry_run: request.dry_run,
        })
    }
}

fn undo(turns: u64, from_turn: Option<u64>) -> UndoTurns {
    UndoTurns {
        turns,
        from_turn,
        dry_run: false,
    }
}

#[test]
fn a_second_undo_takes_the_turn_before_the_first() {
    let bed = Bed::new("default_reply = \"Noted.\"\n");
    let port = Arc::new(Undos::default());
    let meter =
        Arc::new(crate::meter::Meter::load(&bed.cfg, crate::meter::system_clock()).unwrap());
    let engine = bed.engine_with_port(&meter, Arc::clone(&port) as Arc<dyn ToolPort>);
    let id = SessionId::new("s").unwrap();
    for n in 1..=3 {
        bed.fake
            .rt
            .block_on(run_task(&engine, &id, &format!("task {n}")));
    }
    let rt = &bed.fake.rt;
    rt.block_on(engine.undo(&id, undo(1, None))).unwrap();
    rt.block_on(engine.undo(&id, undo(1, None))).unwrap();
    assert_eq!(*port.asked.lock().unwrap(), [3, 2]);

    // One turn is left: two are refused, saying so.
    let Err(ApiFailure::BadRequest(why)) = rt.block_on(engine.undo(&id, undo(2, None))) else {
        panic!("two of one turn left were undone");
    };
    assert!(
        why.contains("1 turn(s) in its current epoch that are not undone"),
        "{why}"
    );
    // From a turn: that turn on, whatever is undone; past the last, refused.
    rt.block_on(engine.undo(&id, undo(0, Some(2)))).unwrap();
    assert_eq!(*port.asked.lock().unwrap(), [3, 2, 2]);
    let Err(ApiFailure::BadRequest(why)) = rt.block_on(engine.undo(&id, undo(0, Some(4)))) else {
        panic!("an undo from a turn that is not there ran");
    };
    assert!(why.contains("no turn 4"), "{why}");
    // Both a count and a turn: refused, saying which to give.
    let Err(ApiFailure::BadRequest(why)) = rt.block_on(engine.undo(&id, undo(1, Some(2)))) else {
        panic!("an undo with a count and a turn ran");
    };
    assert!(why.contains("not both"), "{why}");
    assert_eq!(
        port.asked.lock().unwrap().len(),
        3,
        "nothing reached brokerd"
    );
}
