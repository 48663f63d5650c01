//! What a stopped loopd left of a turn's approvals, and how the next open ends such a turn
//! (issue 33): each approval still waiting is recorded `void`, each approved call whose result
//! never came gets a result that says so, and only then is the turn ended `interrupted`.
//!
//! An approved call is sent to brokerd as soon as its decision is durable, and its result is
//! appended before its turn takes its main slot again (`turn::approval`), so a call approved
//! and left without a result was in flight at brokerd when loopd stopped (or, for the
//! microseconds between the decision and the send, about to be): it may have run, and loopd
//! cannot tell. It is never sent again (nothing may run twice); the model and the owner are
//! told that it may not have run (the daemon writes the owner a notification at start).
//!
//! [`left_unfinished`] reads it from the records alone, so the daemon can tell the owner from
//! a log it has only read, before the open that repairs it.

use super::StoreError;
use super::log::STOPPED_WHILE_WAITING;
use bxcore::{
    ApprovalDecision, ApprovalId, CallId, DataClass, LogRecord, Timestamp, ToolCall, ToolOutcome,
    TurnEnd,
};
use std::collections::HashSet;

/// The result recorded, on the next open, for an approved call whose result never came.
pub const APPROVED_WITHOUT_RESULT: &str = "The owner approved this call, but loopd stopped \
     before its result came back, so it may or may not have run. Check whether it took effect \
     before you call it again (a new call asks the owner again).";

/// What became of an approval of a turn that loopd left unfinished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeftAs {
    /// Asked and never decided: the call did not run.
    Waiting,
    /// Approved, and no result came back: the call may have run.
    ApprovedWithoutResult,
}

/// An approval of an unfinished turn that the owner should hear of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftApproval {
    /// The turn that was left unfinished.
    pub turn: u64,
    /// The call it is about.
    pub call: CallId,
    /// brokerd's id for it.
    pub approval: ApprovalId,
    /// The tool that would run.
    pub tool: String,
    /// Its arguments, as the request recorded them.
    pub arguments: String,
    /// The class of the context it was asked in (the arguments come from it).
    pub class: DataClass,
    /// Whether that context was untrusted.
    pub untrusted: bool,
    /// What became of it.
    pub left: LeftAs,
    /// The id of the model's tool call it answers, when the records give it.
    pub(super) tool_call_id: Option<String>,
}

/// The approvals of the turn `records` leave open (none when the last turn ended): those still
/// waiting, and those approved whose call has no result, in the order they were asked.
pub fn left_unfinished(records: &[LogRecord]) -> Vec<LeftApproval> {
    let Some(from) = records
        .iter()
        .rposition(|r| matches!(r, LogRecord::User { .. }))
    else {
        return Vec::new();
    };
    let turn = match &records[from] {
        LogRecord::User { turn, .. } => *turn,
        _ => return Vec::new(),
    };
    // The call in flight is the one after the last result, the next of the last answer's calls.
    let next_call = CallId(
        records
            .iter()
            .filter_map(|r| match r {
                LogRecord::ToolResult { call, .. } => Some(call.0),
                _ => None,
            })
            .max()
            .unwrap_or(0)
            + 1,
    );
    let mut asked: Vec<(LeftApproval, Option<bool>)> = Vec::new();
    let mut answered: HashSet<CallId> = HashSet::new();
    let mut calls: &[ToolCall] = &[];
    let mut results_since_answer = 0;
    for record in &records[from..] {
        match record {
            LogRecord::TurnEnd { .. } => return Vec::new(),
            LogRecord::Assistant { tool_calls, .. } => {
                calls = tool_calls;
                results_since_answer = 0;
            }
            LogRecord::ToolResult { call, .. } => {
                answered.insert(*call);
                results_since_answer += 1;
            }
            LogRecord::ApprovalRequested {
                call,
                approval,
                tool,
                arguments,
                class,
                untrusted,
                ..
            } => asked.push((
                LeftApproval {
                    turn,
                    call: *call,
                    approval: approval.clone(),
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                    class: *class,
                    untrusted: *untrusted,
                    left: LeftAs::Waiting,
                    tool_call_id: None,
                },
                None,
            )),
            LogRecord::ApprovalDecided {
                approval, decision, ..
            } => {
                // The last decision counts: an approval brokerd refused is `void` after it.
                for (_, decided) in asked.iter_mut().filter(|(l, _)| &l.approval == approval) {
                    *decided = Some(decision.approves());
                }
            }
            _ => {}
        }
    }
    let in_flight = calls.get(results_since_answer).map(|c| c.id.clone());
    asked
        .into_iter()
        .filter_map(|(mut left, decided)| match decided {
            None => Some(left),
            Some(true) if !answered.contains(&left.call) => {
                left.left = LeftAs::ApprovedWithoutResult;
                left.tool_call_id = in_flight.clone().filter(|_| left.call == next_call);
                Some(left)
            }
            Some(_) => None,
        })
        .collect()
}

impl super::Session {
    /// Ends the open turn `turn` that loopd left unfinished: each approval it still waited
    /// for is recorded `void` (brokerd's approval expires unused), each approved call whose
    /// result never came gets [`APPROVED_WITHOUT_RESULT`] as its result (never sent again),
    /// then the turn end `interrupted`. Each step is a durable append, so an open cut short
    /// by another crash does the rest next time and nothing twice.
    pub(super) fn end_unfinished(&mut self, turn: u64) -> Result<(), StoreError> {
        for left in left_unfinished(self.records()) {
            match left.left {
                LeftAs::Waiting => {
                    tracing::warn!(session = %self.id(), approval = %left.approval, "recording an approval left waiting as void");
                    self.append(LogRecord::ApprovalDecided {
                        time: Timestamp::now(),
                        call: left.call,
                        approval: left.approval,
                        decision: ApprovalDecision::Void,
                        uid: None,
                        reason: Some(STOPPED_WHILE_WAITING.to_string()),
                    })?;
                }
                LeftAs::ApprovedWithoutResult => {
                    tracing::warn!(session = %self.id(), approval = %left.approval, call = %left.call, "an approved call's result never came: recording that it may not have run");
                    // Without the model's call id the result could not be matched to its
                    // call; the model reads `baseline::MISSING_RESULT` for it instead.
                    let Some(tool_call_id) = left.tool_call_id else {
                        continue;
                    };
                    self.append(LogRecord::ToolResult {
                        time: Timestamp::now(),
                        call: left.call,
                        tool_call_id,
                        content: APPROVED_WITHOUT_RESULT.to_string(),
                        class: DataClass::Public,
                        untrusted: false,
                        truncated: false,
                        outcome: ToolOutcome::Failed,
                        by_loopd: false,
                    })?;
                }
            }
        }
        tracing::warn!(session = %self.id(), turn, "ending a turn left unfinished as interrupted");
        self.append(LogRecord::TurnEnd {
            time: Timestamp::now(),
            turn,
            end: TurnEnd::Interrupted,
        })?;
        Ok(())
    }
}
