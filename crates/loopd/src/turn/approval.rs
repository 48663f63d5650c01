//! A call brokerd asks the owner about (`ToolResponse::Ask`, `docs/approvals.md`): recorded,
//! listed, waited for with the main slot given back, decided, and sent again with the
//! approval when the owner approved it. Silence means no: the wait is bounded, and a wait
//! that ends any other way than by an approval runs nothing.
//!
//! The order is the guarantee: the request is in the session log before anyone is told of it
//! (the notification of an unattended turn, the desk's list, the turn event), and the
//! decision is in the log before the owner's answer is acknowledged, before the turn event,
//! and before the call is sent again. An approved call is sent right after its decision, with
//! the main slot still given back: its result is in the log before the turn waits for the
//! slot again, so a loopd stopped while the turn waits for its slot loses nothing, and one
//! stopped while the call runs is told on the next start (`session::recover`).

use super::call::from_port;
use super::{Runtime, Stop};
use crate::baseline;
use crate::journal;
use crate::outcome::CallOutcome;
use crate::runtime::OwnerReply;
use crate::session::Session;
use crate::text::cap_chars;
use bxcore::{
    ApprovalDecision, CallId, DenyReason, Labels, LogRecord, Timestamp, ToolOutcome, TurnEnd,
    TurnEvent, denial_message,
};
use proto::api::reserved::HEARTBEAT_SESSION;
use proto::api::{Notification, OwnerAnswer, PendingApproval};
use proto::{ApprovalAsk, ApprovalUse, ToolRequest, ToolResponse};
use std::time::Duration;
use tokio::sync::oneshot;

/// The reason the model reads when the owner denied a call and gave none.
pub const NO_REASON: &str = "no reason given";
/// Why a wait is void when its turn was cancelled.
pub const CANCELLED: &str = "the turn was cancelled";
/// Why a wait is void when loopd is shutting down.
pub const SHUTTING_DOWN: &str = "loopd is shutting down";
/// Why a wait is void when the turn reached a budget meanwhile (the budget's words follow).
pub const BUDGET_REACHED: &str = "the turn reached a budget";
/// The most characters of a call's arguments quoted in a notification (`boxctl approvals`
/// shows them whole).
pub const NOTIFICATION_ARGUMENT_CHARS: usize = 200;

/// How a wait for the owner ended.
enum Waited {
    /// The owner answered.
    Answered(OwnerReply),
    /// Nobody answered in time.
    TimedOut,
    /// The turn was stopped.
    Stopped,
    /// The wait could not go on (the desk is gone, a wait on the wrong thread): why.
    Broken(String),
}

/// What was decided, ready to be recorded.
struct Decision {
    decision: ApprovalDecision,
    uid: Option<u32>,
    reason: Option<String>,
}

impl Decision {
    fn void(reason: impl Into<String>) -> Decision {
        Decision {
            decision: ApprovalDecision::Void,
            uid: None,
            reason: Some(reason.into()),
        }
    }
}

/// Asks the owner about `request` (call `request.call` of `session`), which brokerd answered
/// with `ask`, waits for the answer, and runs the call when it was approved. The outcome is
/// the tool's, or the refusal the model reads.
pub(super) fn ask_owner(
    rt: &Runtime<'_>,
    session: &mut Session,
    request: ToolRequest,
    ask: ApprovalAsk,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> CallOutcome {
    let call = request.call;
    // Never longer than brokerd holds the approval: an answer after that would be refused.
    let wait_ms = rt.cfg.approvals.timeout_ms.min(ask.expires_in_ms);
    let asked = Timestamp::now();
    let record = LogRecord::ApprovalRequested {
        time: asked,
        call,
        approval: ask.id.clone(),
        tool: ask.tool.clone(),
        arguments: ask.arguments.clone(),
        reason: ask.reason.clone(),
        class: ask.context.class,
        untrusted: ask.context.untrusted,
        timeout_ms: wait_ms,
    };
    if let Err(e) = session.append(record) {
        return not_run(&format!("the request could not be recorded ({e})"));
    }
    let pending = PendingApproval {
        id: ask.id.clone(),
        session: session.id().clone(),
        turn: request.turn,
        call,
        tool: ask.tool.clone(),
        arguments: ask.arguments.clone(),
        reason: ask.reason.clone(),
        class: ask.context.class,
        untrusted: ask.context.untrusted,
        asked,
        timeout_ms: wait_ms,
    };
    // A turn nobody watches never waits silently: no notification, no wait.
    if (rt.owner.unattended() || unattended(session))
        && let Err(e) = notify(rt, session, &pending)
    {
        let why = format!("the notification could not be written ({e})");
        return decide_unanswered(session, &ask, call, Decision::void(why), on_event);
    }
    let mut answers = match rt.owner.ask(pending) {
        Ok(answers) => answers,
        Err(why) => return decide_unanswered(session, &ask, call, Decision::void(why), on_event),
    };
    on_event(&TurnEvent::ApprovalRequested {
        call,
        approval: ask.id.clone(),
        tool: ask.tool.clone(),
        arguments: ask.arguments.clone(),
        reason: ask.reason.clone(),
        timeout_ms: wait_ms,
    });
    rt.owner.release_slot();
    let mut waited = wait(rt, &mut answers, stop, wait_ms);
    if !matches!(waited, Waited::Answered(_)) && !rt.owner.withdraw(&ask.id) {
        // An answer took it off the list first: it is in the channel, and its sender waits
        // for it to be recorded.
        if let Ok(reply) = answers.try_recv() {
            waited = Waited::Answered(reply);
        }
    }
    let (decision, recorded) = match waited {
        Waited::Answered(reply) => {
            let decision = if stop.is_set() {
                Decision::void(stopped(stop))
            } else {
                owners(&reply)
            };
            (decision, Some(reply.recorded))
        }
        Waited::TimedOut => {
            let waited = humantime::format_duration(Duration::from_millis(wait_ms));
            let decision = Decision {
                decision: ApprovalDecision::TimedOut,
                uid: None,
                reason: Some(format!("no answer from the owner in {waited}")),
            };
            (decision, None)
        }
        Waited::Stopped => (Decision::void(stopped(stop)), None),
        Waited::Broken(why) => (Decision::void(why), None),
    };
    let kept = record_decision(session, &ask, call, &decision, on_event);
    if let Some(recorded) = recorded {
        let _ = recorded.send(kept.clone().map(|()| decision.decision));
    }
    // The main slot is taken again by the turn once this call's result is in the log
    // (`turn::steps`), not here: an approved call goes to brokerd at once, so no wait for the
    // slot stands between the owner's approval and the run, where a stopped loopd would lose
    // the call (issue 33).
    if let Err(e) = kept {
        return not_run(&format!("the decision could not be recorded ({e})"));
    }
    if !decision.decision.approves() {
        return refusal(&decision);
    }
    // Stopped since the answer was recorded: the call does not run.
    if stop.is_set() {
        let void = Decision::void(stopped(stop));
        let _ = record_decision(session, &ask, call, &void, on_event);
        return refusal(&void);
    }
    send_approved(
        rt,
        session,
        request,
        &ask,
        decision.decision,
        stop,
        on_event,
    )
}

/// Sends the approved call again, with its approval. brokerd refusing the approval (it
/// restarted meanwhile, or the approval expired) makes it void: recorded, and the model reads
/// the refusal.
fn send_approved(
    rt: &Runtime<'_>,
    session: &mut Session,
    mut request: ToolRequest,
    ask: &ApprovalAsk,
    decision: ApprovalDecision,
    stop: &Stop,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> CallOutcome {
    let call = request.call;
    request.approval = Some(ApprovalUse {
        id: ask.id.clone(),
        for_turn: decision == ApprovalDecision::ApprovedForTurn,
    });
    match rt.port.call_until(&request, stop.token()) {
        ToolResponse::Denied {
            reason: DenyReason::ApprovalRefused,
            detail,
            labels,
        } => {
            let why = detail
                .clone()
                .unwrap_or_else(|| denial_message(DenyReason::ApprovalRefused, None));
            let _ = record_decision(session, ask, call, &Decision::void(why), on_event);
            from_port(ToolResponse::Denied {
                reason: DenyReason::ApprovalRefused,
                detail,
                labels,
            })
        }
        // brokerd checks an approval before anything else, so this is a broker that forgot
        // it: never a second wait for one call.
        ToolResponse::Ask { .. } => {
            let void = Decision::void("brokerd asked again after the owner approved the call");
            let _ = record_decision(session, ask, call, &void, on_event);
            refusal(&void)
        }
        response => from_port(response),
    }
}

/// The owner's answer as a decision: the reason goes with a denial only.
fn owners(reply: &OwnerReply) -> Decision {
    let reason = match reply.answer {
        OwnerAnswer::Deny => Some(
            reply
                .reason
                .as_deref()
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .unwrap_or(NO_REASON)
                .to_string(),
        ),
        OwnerAnswer::Approve | OwnerAnswer::ApproveForTurn => None,
    };
    Decision {
        decision: reply.answer.decision(),
        uid: reply.uid,
        reason,
    }
}

/// Waits for the owner's answer, the turn's stop or the end of `wait_ms`, whichever comes
/// first (a stop first of all: a cancelled turn runs nothing more).
fn wait(
    rt: &Runtime<'_>,
    answers: &mut oneshot::Receiver<OwnerReply>,
    stop: &Stop,
    wait_ms: u64,
) -> Waited {
    let token = stop.token().clone();
    let waited = rt.blocking.wait(async {
        Ok::<_, crate::blocking::OnRuntimeThread>(tokio::select! {
            biased;
            () = token.cancelled() => Waited::Stopped,
            reply = answers => match reply {
                Ok(reply) => Waited::Answered(reply),
                Err(_) => Waited::Broken("the approvals desk closed while the call waited".into()),
            },
            () = tokio::time::sleep(Duration::from_millis(wait_ms)) => Waited::TimedOut,
        })
    });
    waited.unwrap_or_else(|e| Waited::Broken(e.to_string()))
}

/// Why a stopped turn's wait is void.
fn stopped(stop: &Stop) -> String {
    match stop.end() {
        TurnEnd::Interrupted => SHUTTING_DOWN.to_string(),
        TurnEnd::Budget { message, .. } => format!("{BUDGET_REACHED}: {message}"),
        _ => CANCELLED.to_string(),
    }
}

/// Records a decision reached without the owner's answer (the call is void before it was
/// listed) and gives the model the refusal.
fn decide_unanswered(
    session: &mut Session,
    ask: &ApprovalAsk,
    call: CallId,
    decision: Decision,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> CallOutcome {
    match record_decision(session, ask, call, &decision, on_event) {
        Ok(()) => refusal(&decision),
        Err(e) => not_run(&format!("the decision could not be recorded ({e})")),
    }
}

/// Appends the decision, then tells the turn's watchers.
fn record_decision(
    session: &mut Session,
    ask: &ApprovalAsk,
    call: CallId,
    decision: &Decision,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<(), String> {
    let record = LogRecord::ApprovalDecided {
        time: Timestamp::now(),
        call,
        approval: ask.id.clone(),
        decision: decision.decision,
        uid: decision.uid,
        reason: decision.reason.clone(),
    };
    if let Err(e) = session.append(record) {
        tracing::error!(session = %session.id(), approval = %ask.id, error = %e, "cannot record an approval's decision; the call does not run");
        return Err(e.to_string());
    }
    on_event(&TurnEvent::ApprovalDecided {
        call,
        approval: ask.id.clone(),
        decision: decision.decision,
    });
    Ok(())
}

/// What the model reads of a call that was not approved.
fn refusal(decision: &Decision) -> CallOutcome {
    let reason = decision.reason.as_deref().unwrap_or(NO_REASON);
    let content = match decision.decision {
        ApprovalDecision::Denied => format!("the owner denied this call: {reason}"),
        ApprovalDecision::TimedOut => reason.to_string(),
        _ => format!("the call waited for the owner's approval and did not run: {reason}"),
    };
    not_approved(content)
}

/// A call that did not run because something about its approval failed.
fn not_run(why: &str) -> CallOutcome {
    not_approved(format!(
        "the call needs the owner's approval and did not run: {why}"
    ))
}

/// loopd's words (and the owner's reason: trusted) as the outcome of a call brokerd asked
/// about. It reached brokerd, so it is not marked as answered by loopd alone.
fn not_approved(content: String) -> CallOutcome {
    CallOutcome {
        by_loopd: false,
        ..CallOutcome::local(
            content,
            ToolOutcome::Denied {
                reason: DenyReason::NotApproved,
            },
        )
    }
}

/// Whether nobody watches `session`'s turns by its id: the heartbeat's, and its subagents'
/// (a schedule's run says so through its owner, whatever its session).
fn unattended(session: &Session) -> bool {
    let heartbeat = |id: &bxcore::SessionId| id.as_str() == HEARTBEAT_SESSION;
    heartbeat(session.id()) || session.root_turn().is_some_and(|(root, _)| heartbeat(root))
}

/// Writes the request as a notification (`boxctl notifications`), labelled with the context
/// it was made in (the arguments come from it).
fn notify(
    rt: &Runtime<'_>,
    session: &Session,
    pending: &PendingApproval,
) -> Result<(), journal::JournalError> {
    let labels = Labels::derived(Labels::PUBLIC, baseline::context_labels(session));
    let waits = humantime::format_duration(Duration::from_millis(pending.timeout_ms));
    let note = Notification {
        time: pending.asked,
        session: pending.session.clone(),
        turn: pending.turn,
        text: format!(
            "approval {id} waits for the owner: {tool} {arguments} ({reason}); answer within \
             {waits} with boxctl approve {id} or boxctl deny {id}",
            id = pending.id,
            tool = pending.tool,
            arguments = cap_chars(&pending.arguments, NOTIFICATION_ARGUMENT_CHARS),
            reason = pending.reason,
        ),
        class: labels.class,
        untrusted: labels.untrusted,
        to: None,
    };
    journal::append(&rt.cfg.state_dir.join(journal::NOTIFICATIONS_FILE), &[note])
}
