#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The owner answers: approved (once, or for the rest of the turn) the call runs with its
//! approval; denied, the model reads the owner's reason.

use super::{ARGUMENTS, Bed, not_approved, requested, sid, trail};
use crate::api::ApiFailure;
use crate::heartbeat;
use crate::tools::tests::asking::{self, ASKED_TOOL, AskingPort};
use crate::turn::Stop;
use bxcore::{ApprovalDecision, LogRecord, TurnEnd, TurnEvent};
use proto::ApprovalUse;
use proto::api::OwnerAnswer;

#[test]
fn an_approved_call_is_sent_again_with_its_approval_and_its_result_reaches_the_model() {
    let bed = Bed::new();
    let port = AskingPort::new();
    let (ran, (id, answered)) = bed.turn(&port, "s", "save a note", &Stop::new(), |d| {
        let id = d.asked();
        let listed = bed.desk.list().approvals;
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].session.as_str(), listed[0].tool.as_str()),
            ("s", ASKED_TOOL)
        );
        let answered = d
            .answer(&id, OwnerAnswer::Approve, None, Some(1000))
            .unwrap();
        // The answer returns once the decision is durable.
        let on_disk = bed.store.read(&sid("s")).unwrap();
        assert!(on_disk.iter().any(|r| matches!(
            r,
            LogRecord::ApprovalDecided {
                decision: ApprovalDecision::Approved,
                uid: Some(1000),
                ..
            }
        )));
        (id, answered)
    });
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    assert_eq!(answered.decision, ApprovalDecision::Approved);
    assert_eq!(answered.session, sid("s"));
    let requests = port.requests();
    assert_eq!(requests.len(), 2, "asked once, sent again once");
    assert_eq!(requests[0].approval, None);
    assert_eq!(
        requests[1].approval,
        Some(ApprovalUse {
            id: id.clone(),
            for_turn: false
        })
    );
    assert_eq!(
        (&requests[1].arguments, requests[1].call),
        (&requests[0].arguments, requests[0].call)
    );
    let result = asking::ran(ASKED_TOOL, ARGUMENTS);
    assert_eq!(
        trail(&ran.session),
        [
            requested(),
            "decided approved Some(1000) None".into(),
            format!("result Ok: {result}"),
        ]
    );
    assert!(bed.last_message().contains(&result), "the model saw it");
    let kinds: Vec<&str> = ran
        .events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ApprovalRequested { .. } => Some("requested"),
            TurnEvent::ApprovalDecided { .. } => Some("decided"),
            TurnEvent::ToolResult { .. } => Some("result"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["requested", "decided", "result"]);
    // Answered: off the list, and a second answer finds nothing.
    assert!(bed.desk.list().approvals.is_empty());
    assert!(matches!(
        bed.answer(&id, OwnerAnswer::Deny, None, None),
        Err(ApiFailure::NotFound(_))
    ));
    // An attended session's request is no notification.
    assert!(heartbeat::list(&bed.cfg).unwrap().is_empty());
}

#[test]
fn a_denied_call_never_runs_and_the_model_reads_the_owners_reason() {
    let bed = Bed::new();
    let port = AskingPort::new();
    let (ran, _) = bed.turn(&port, "s", "save a note", &Stop::new(), |d| {
        let id = d.asked();
        d.answer(&id, OwnerAnswer::Deny, Some(" not today "), Some(1000))
            .unwrap()
    });
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let told = "the owner denied this call: not today";
    assert_eq!(
        trail(&ran.session),
        [
            requested(),
            "decided denied Some(1000) Some(\"not today\")".into(),
            not_approved(told),
        ]
    );
    assert!(bed.last_message().contains(told));
    drop(ran.session);
    // Without a reason, the model is told there was none.
    let (ran, _) = bed.turn(&port, "s", "save again", &Stop::new(), |d| {
        let id = d.asked();
        d.answer(&id, OwnerAnswer::Deny, None, None).unwrap()
    });
    let told = "the owner denied this call: no reason given";
    assert_eq!(trail(&ran.session)[2], not_approved(told));
    assert_eq!(port.requests().len(), 2, "never sent with an approval");
    assert!(port.requests().iter().all(|r| r.approval.is_none()));
}

#[test]
fn approved_for_the_turn_a_second_identical_call_is_not_asked_but_one_in_the_next_turn_is() {
    let bed = Bed::new();
    let port = AskingPort::new();
    let (ran, ()) = bed.turn(&port, "s", "call it twice", &Stop::new(), |d| {
        let id = d.asked();
        d.answer(&id, OwnerAnswer::ApproveForTurn, None, Some(7))
            .unwrap();
    });
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    let result = format!("result Ok: {}", asking::ran(ASKED_TOOL, ARGUMENTS));
    assert_eq!(
        trail(&ran.session),
        [
            requested(),
            "decided approved_for_turn Some(7) None".into(),
            result.clone(),
            result.clone(),
        ]
    );
    let approvals: Vec<Option<bool>> = port
        .requests()
        .iter()
        .map(|r| r.approval.as_ref().map(|a| a.for_turn))
        .collect();
    assert_eq!(approvals, [None, Some(true), None]);
    drop(ran.session);
    // The next turn asks again.
    let (ran, ()) = bed.turn(&port, "s", "save a note", &Stop::new(), |d| {
        let id = d.asked();
        d.answer(&id, OwnerAnswer::Approve, None, Some(7)).unwrap();
    });
    assert_eq!(
        trail(&ran.session),
        [requested(), "decided approved Some(7) None".into(), result]
    );
    assert_eq!(port.requests().len(), 5);
}

/// An owner whose answer comes just as the wait ends: it answers (approve) when the turn
/// withdraws the call, as the desk's answer does when it takes the call off the list first.
struct LateOwner {
    reply: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<crate::turn::OwnerReply>>>,
    recorded:
        std::sync::Mutex<Option<tokio::sync::oneshot::Receiver<Result<ApprovalDecision, String>>>>,
}

impl crate::turn::Owner for LateOwner {
    fn ask(
        &self,
        _asked: proto::api::PendingApproval,
    ) -> Result<tokio::sync::oneshot::Receiver<crate::turn::OwnerReply>, String> {
        let (reply, answers) = tokio::sync::oneshot::channel();
        *self.reply.lock().unwrap() = Some(reply);
        Ok(answers)
    }

    fn withdraw(&self, _id: &bxcore::ApprovalId) -> bool {
        let (recorded, acknowledged) = tokio::sync::oneshot::channel();
        let reply = crate::turn::OwnerReply {
            answer: OwnerAnswer::Approve,
            reason: None,
            uid: Some(42),
            recorded,
        };
        let _ = self.reply.lock().unwrap().take().unwrap().send(reply);
        *self.recorded.lock().unwrap() = Some(acknowledged);
        false
    }

    fn release_slot(&self) {}

    fn retake_slot(&self) -> bool {
        true
    }
}

#[test]
fn an_answer_taken_off_the_list_as_the_wait_ends_is_the_one_recorded_and_acknowledged() {
    let bed = Bed::waiting_ms(1);
    let port = AskingPort::new();
    let owner = LateOwner {
        reply: std::sync::Mutex::new(None),
        recorded: std::sync::Mutex::new(None),
    };
    let ran = bed.run(&port, &owner, "s", "save a note", &Stop::new(), &mut |_| {});
    assert_eq!(ran.end.unwrap(), TurnEnd::Done);
    assert_eq!(trail(&ran.session)[1], "decided approved Some(42) None");
    assert_eq!(port.requests().len(), 2, "sent again with the approval");
    let acknowledged = owner.recorded.lock().unwrap().take().unwrap();
    assert_eq!(
        acknowledged.blocking_recv().unwrap(),
        Ok(ApprovalDecision::Approved)
    );
}
