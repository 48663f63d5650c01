#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Nobody approves: silence until the wait ends, a stopped turn, brokerd refusing the
//! approval, a runtime without an engine; and the notification of an unattended turn.

use super::{ARGUMENTS, Bed, not_approved, requested, sid, trail};
use crate::api::ApiFailure;
use crate::heartbeat;
use crate::tools::tests::asking::{ASKED_TOOL, AskingPort, FORGOTTEN, REASON};
use crate::turn::{NO_OWNER, NoOwner, Stop};
use bxcore::{DataClass, DenyReason, LogRecord, Timestamp, ToolOutcome, TurnEnd, TurnEvent};
use proto::api::OwnerAnswer;

#[test]
fn silence_means_no_after_the_wait_and_the_turn_goes_on() {
    let bed = Bed::waiting_ms(40);
    let port = AskingPort::new();
    let (ran, ()) = bed.turn(&port, "s", "save a note", &Stop::new(), |_| ());
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let told = "no answer from the owner in 40ms";
    assert_eq!(
        trail(&ran.session),
        [
            requested(),
            format!("decided timed_out None Some({told:?})"),
            not_approved(told),
        ]
    );
    assert!(bed.last_message().contains(told));
    assert!(bed.desk.list().approvals.is_empty());
    assert_eq!(port.requests().len(), 1);
    // The wait is never longer than brokerd holds the approval.
    let bed = Bed::new();
    let port = AskingPort::expiring_in(30);
    let (ran, ()) = bed.turn(&port, "s", "save a note", &Stop::new(), |_| ());
    assert!(
        ran.session
            .records()
            .iter()
            .any(|r| matches!(r, LogRecord::ApprovalRequested { timeout_ms: 30, .. }))
    );
    assert_eq!(
        trail(&ran.session)[2],
        not_approved("no answer from the owner in 30ms")
    );
}

#[test]
fn a_turn_stopped_while_it_waits_records_the_approval_void_and_never_sends_the_call() {
    for (shutdown, end, why) in [
        (false, TurnEnd::Cancelled, "the turn was cancelled"),
        (true, TurnEnd::Interrupted, "loopd is shutting down"),
    ] {
        let bed = Bed::new();
        let port = AskingPort::new();
        let stop = Stop::new();
        let (ran, id) = bed.turn(&port, "s", "save a note", &stop, |d| {
            let id = d.asked();
            if shutdown {
                stop.shut_down();
            } else {
                stop.cancel();
            }
            id
        });
        assert_eq!(ran.end.unwrap(), end);
        let trail = trail(&ran.session);
        assert_eq!(trail[1], format!("decided void None Some({why:?})"));
        assert!(trail[2].contains(why), "{trail:?}");
        assert_eq!(port.requests().len(), 1, "the call is never sent again");
        assert!(bed.desk.list().approvals.is_empty());
        assert!(matches!(
            bed.answer(&id, OwnerAnswer::Approve, None, None),
            Err(ApiFailure::NotFound(_))
        ));
    }
}

#[test]
fn a_turn_that_reaches_max_turn_ms_while_it_waits_ends_at_the_budget_and_runs_nothing() {
    let mut bed = Bed::new();
    bed.cfg.budgets.turn.max_turn_ms = Some(300);
    let port = AskingPort::new();
    let started = std::time::Instant::now();
    let (ran, id) = bed.turn(&port, "s", "save a note", &Stop::new(), |d| d.asked());
    assert!(started.elapsed() < std::time::Duration::from_millis(super::WAIT_MS));
    match ran.end.unwrap() {
        TurnEnd::Budget { budget, message } => {
            assert_eq!(budget, "max_turn_ms");
            assert!(message.ends_with("ms; max_turn_ms is 300"), "{message}");
        }
        other => panic!("expected a budget end, got {other:?}"),
    }
    let trail = trail(&ran.session);
    assert!(
        trail[1].starts_with(&format!(
            "decided void None Some(\"{}: the turn ran for ",
            crate::turn::BUDGET_REACHED
        )),
        "{trail:?}"
    );
    assert_eq!(port.requests().len(), 1, "the call is never sent again");
    assert!(matches!(
        bed.answer(&id, OwnerAnswer::Approve, None, None),
        Err(ApiFailure::NotFound(_))
    ));
}

#[test]
fn an_approval_brokerd_refuses_after_the_owner_approved_is_recorded_void() {
    let bed = Bed::new();
    let port = AskingPort::forgetting();
    let (ran, _) = bed.turn(&port, "s", "save a note", &Stop::new(), |d| {
        let id = d.asked();
        d.answer(&id, OwnerAnswer::Approve, None, Some(1000))
            .unwrap()
    });
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let trail = trail(&ran.session);
    assert_eq!(
        trail[..3],
        [
            requested(),
            "decided approved Some(1000) None".to_string(),
            format!("decided void None Some({FORGOTTEN:?})"),
        ]
    );
    let refused = ToolOutcome::Denied {
        reason: DenyReason::ApprovalRefused,
    };
    assert!(
        trail[3].starts_with(&format!("result {refused:?}")) && trail[3].contains(FORGOTTEN),
        "{trail:?}"
    );
    assert!(bed.last_message().contains(FORGOTTEN), "the model sees it");
}

#[test]
fn a_heartbeat_turns_request_and_its_subagents_are_written_as_notifications() {
    let bed = Bed::new();
    let port = AskingPort::new();
    // A child of a heartbeat turn: its calls count against that turn.
    let mut child = bed.store.create(&sid("sub-heartbeat-1")).unwrap();
    child
        .append(LogRecord::Inherited {
            time: Timestamp::now(),
            parent: sid("heartbeat"),
            class: DataClass::Public,
            untrusted: false,
            root_session: sid("heartbeat"),
            root_turn: 1,
        })
        .unwrap();
    drop(child);
    for (n, session) in ["heartbeat", "sub-heartbeat-1"].into_iter().enumerate() {
        let (ran, ()) = bed.turn(&port, session, "save a note", &Stop::new(), |d| {
            let id = d.asked();
            // Written before the owner could answer: nobody watches this turn.
            let notes = heartbeat::list(&bed.cfg).unwrap();
            assert_eq!(notes.len(), n + 1);
            let note = notes.last().unwrap();
            assert_eq!(note.session, sid(session));
            for words in [id.as_str(), ASKED_TOOL, REASON, "boxctl approve"] {
                assert!(note.text.contains(words), "{words}: {}", note.text);
            }
            d.answer(&id, OwnerAnswer::Deny, None, None).unwrap();
        });
        assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    }
}

#[test]
fn a_scheduled_runs_request_is_written_as_a_notification_whatever_its_session() {
    let bed = Bed::new();
    let port = AskingPort::new();
    let (ran, ()) = bed.turn_as(true, &port, "reports", "save a note", &Stop::new(), |d| {
        let id = d.asked();
        // Written before the owner could answer: the schedule's run is unattended.
        let notes = heartbeat::list(&bed.cfg).unwrap();
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].session, sid("reports"));
        assert!(notes[0].text.contains(id.as_str()), "{}", notes[0].text);
        d.answer(&id, OwnerAnswer::Deny, None, None).unwrap();
    });
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let refused = ran
        .events
        .iter()
        .filter(
            |e| matches!(e, TurnEvent::ApprovalDecided { decision, .. } if !decision.approves()),
        )
        .count();
    assert_eq!(refused, 1, "the run's outcome counts it (not_approved)");
}

#[test]
fn without_an_engine_nobody_can_answer_and_the_call_is_void_at_once() {
    let bed = Bed::new();
    let port = AskingPort::new();
    let ran = bed.run(
        &port,
        &NoOwner,
        "s",
        "save a note",
        &Stop::new(),
        &mut |_| {},
    );
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let trail = trail(&ran.session);
    assert_eq!(trail[1], format!("decided void None Some({NO_OWNER:?})"));
    assert!(trail[2].contains(NO_OWNER));
    assert_eq!(port.requests().len(), 1);
}

#[test]
fn a_heartbeat_request_whose_notification_cannot_be_written_is_void_and_never_waits() {
    // Nobody could learn of the request: it must not wait silently.
    let bed = Bed::new();
    std::fs::create_dir(bed.cfg.state_dir.join(heartbeat::NOTIFICATIONS_FILE)).unwrap();
    let port = AskingPort::new();
    let (ran, ()) = bed.turn(&port, "heartbeat", "save a note", &Stop::new(), |_| ());
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let trail = trail(&ran.session);
    assert!(
        trail[1].starts_with("decided void None Some(\"the notification could not be written"),
        "{trail:?}"
    );
    assert!(
        ran.events
            .iter()
            .all(|e| !matches!(e, bxcore::TurnEvent::ApprovalRequested { .. }))
    );
    assert!(bed.desk.list().approvals.is_empty());
    assert_eq!(port.requests().len(), 1);
}

/// An owner that answers "approve" at once, and whose main slot cannot be taken again: the
/// whole turn was stopped after the approval was recorded (`TurnOwner` watches the top turn,
/// a subagent's call waits through it).
struct SlotLost;

impl crate::turn::Owner for SlotLost {
    fn ask(
        &self,
        _asked: proto::api::PendingApproval,
    ) -> Result<tokio::sync::oneshot::Receiver<crate::turn::OwnerReply>, String> {
        let (reply, answers) = tokio::sync::oneshot::channel();
        let (recorded, _) = tokio::sync::oneshot::channel();
        let _ = reply.send(crate::turn::OwnerReply {
            answer: OwnerAnswer::Approve,
            reason: None,
            uid: Some(7),
            recorded,
        });
        Ok(answers)
    }

    fn withdraw(&self, _id: &bxcore::ApprovalId) -> bool {
        true
    }

    fn release_slot(&self) {}

    fn retake_slot(&self) -> bool {
        false
    }
}

#[test]
fn an_approved_call_runs_and_is_recorded_before_its_turn_takes_the_slot_again() {
    // Issue 33: the slot is taken again only once the approved call's result is in the log,
    // so no wait for it stands between the approval and the run. A turn that cannot take it
    // goes no further (no model call), the call's result kept.
    let bed = Bed::new();
    let port = AskingPort::new();
    let ran = bed.run(
        &port,
        &SlotLost,
        "s",
        "save a note",
        &Stop::new(),
        &mut |_| {},
    );
    let trail = trail(&ran.session);
    assert_eq!(trail[1], "decided approved Some(7) None");
    assert_eq!(
        trail[2],
        format!(
            "result Ok: {}",
            crate::tools::tests::asking::ran(ASKED_TOOL, ARGUMENTS)
        )
    );
    assert_eq!(trail.len(), 3, "{trail:?}");
    let requests = port.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1].approval.is_some(),
        "sent once with the approval"
    );
    assert_eq!(ran.end.unwrap(), TurnEnd::Cancelled);
    assert_eq!(
        bed.fake.server.requests().len(),
        1,
        "no model call after it"
    );
}
