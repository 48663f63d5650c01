//! The bodies of loopd's approval routes: the calls that wait for the owner, and the owner's
//! answer (`GET /v1/approvals`, `POST /v1/approvals/{id}`).

use bxcore::{ApprovalDecision, ApprovalId, CallId, DataClass, SessionId, Timestamp};
use serde::{Deserialize, Serialize};

/// The longest reason an owner may give with a denial, in bytes: it reaches the model.
pub const MAX_DENY_REASON_BYTES: usize = 1_000;

/// One call waiting for the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingApproval {
    /// brokerd's id for it: what `POST /v1/approvals/{id}` answers.
    pub id: ApprovalId,
    /// The session whose turn waits.
    pub session: SessionId,
    /// That turn.
    pub turn: u64,
    /// The call's number in the session.
    pub call: CallId,
    /// The tool that would run.
    pub tool: String,
    /// Its arguments, whole (JSON text): what would run.
    pub arguments: String,
    /// Why brokerd asks.
    pub reason: String,
    /// The class of the session's context.
    pub class: DataClass,
    /// Whether the session's context is untrusted.
    pub untrusted: bool,
    /// When it was asked.
    pub asked: Timestamp,
    /// How long the turn waits from then, in milliseconds; then the call is denied.
    pub timeout_ms: u64,
}

/// Every call waiting for the owner, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalList {
    /// The waiting calls.
    pub approvals: Vec<PendingApproval>,
}

/// What the owner can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OwnerAnswer {
    /// Run this call once.
    Approve,
    /// Run this call, and later calls of the same tool in the same turn without asking.
    ApproveForTurn,
    /// Do not run it; the model is told the reason.
    Deny,
}

impl OwnerAnswer {
    /// The decision it records.
    pub fn decision(self) -> ApprovalDecision {
        match self {
            OwnerAnswer::Approve => ApprovalDecision::Approved,
            OwnerAnswer::ApproveForTurn => ApprovalDecision::ApprovedForTurn,
            OwnerAnswer::Deny => ApprovalDecision::Denied,
        }
    }
}

/// `POST /v1/approvals/{id}`'s body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalAnswer {
    /// The answer.
    pub answer: OwnerAnswer,
    /// Why, for a denial (at most [`MAX_DENY_REASON_BYTES`]); the model reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What `POST /v1/approvals/{id}` answers once the decision is in the session log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalAnswered {
    /// The approval.
    pub id: ApprovalId,
    /// The session whose turn goes on.
    pub session: SessionId,
    /// The call.
    pub call: CallId,
    /// The decision recorded.
    pub decision: ApprovalDecision,
}
