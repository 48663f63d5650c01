//! The last step of the decision order (`docs/approvals.md`, "The decision order"): whether a
//! call that passed every deny check and its tool's own check runs now, or asks the owner
//! first. It comes last so that the owner is never asked about a call that would be refused.
//!
//! 1. The request carries an approval: [`ApprovalTable::consume`] checks it; a good one runs
//!    the call (and with `for_turn` leaves a turn allowance), a bad one is refused
//!    (`ApprovalRefused`). Also on a call whose grant needs no approval.
//! 2. The grant needs no approval for this call ([`ask_reason`]): it runs.
//! 3. A turn allowance for this session, turn and tool: it runs.
//! 4. Otherwise an approval is minted and the answer is an [`ApprovalAsk`]; with
//!    `[approvals] max_pending` outstanding, the call is denied (`NotApproved`).
//!
//! A call is counted for `max_calls_per_turn` only when it runs, never when it is asked about;
//! the limit is checked again here because the counters are not held across the tool's check.

use super::approvals::{ApprovalTable, MintError};
use super::{CallCounters, rate_limit};
use crate::audit::ApprovalScope;
use crate::config::{Approve, Grant, WhenUntrusted};
use bxcore::{ApprovalId, DenyReason};
use proto::{ApprovalAsk, ToolRequest};
use serde_json::Value;
use std::time::Instant;

/// What the approval step says.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// The call runs (it has been counted).
    Run {
        /// The approval it runs under, and how, when it runs under one.
        approval: Option<(ApprovalId, ApprovalScope)>,
    },
    /// The owner must decide first: nothing runs; an approval was minted.
    Ask(ApprovalAsk),
    /// The call may not run.
    Deny {
        /// Why.
        reason: DenyReason,
        /// brokerd's own words; never the arguments.
        detail: String,
        /// The approval the request carried, when it was refused.
        approval: Option<ApprovalId>,
    },
    /// No approval could be minted (no random numbers, or it could not be kept in the state
    /// dir): the call fails, nothing ran.
    Fail {
        /// Why, in brokerd's words.
        message: String,
    },
}

/// The approval step for `request`, allowed so far under `grant`, at `now`: see the module.
/// `arguments` are the request's arguments as [`super::decide`] parsed them, the value the
/// tool checked and will run with: an [`ApprovalAsk`] shows the owner exactly that value.
pub fn admit(
    request: &ToolRequest,
    arguments: &Value,
    grant: &Grant,
    table: &mut ApprovalTable,
    counters: &mut CallCounters,
    now: Instant,
) -> Admission {
    if let Err((reason, detail)) = rate_limit(grant, request, counters) {
        return Admission::Deny {
            reason,
            detail,
            approval: None,
        };
    }
    let admission = approve(request, arguments, grant, table, now);
    if let Admission::Run { .. } = admission {
        let counted = request.counted_turn();
        counters.record(&counted.session, counted.turn, &request.tool);
    }
    admission
}

fn approve(
    request: &ToolRequest,
    arguments: &Value,
    grant: &Grant,
    table: &mut ApprovalTable,
    now: Instant,
) -> Admission {
    if let Some(used) = &request.approval {
        return match table.consume(&used.id, request, now) {
            Ok(()) => {
                let scope = if used.for_turn {
                    table.allow_turn(
                        &request.session,
                        request.turn,
                        &request.tool,
                        used.id.clone(),
                        now,
                    );
                    ApprovalScope::Turn
                } else {
                    ApprovalScope::Call
                };
                Admission::Run {
                    approval: Some((used.id.clone(), scope)),
                }
            }
            Err(refusal) => Admission::Deny {
                reason: DenyReason::ApprovalRefused,
                detail: refusal.to_string(),
                approval: Some(used.id.clone()),
            },
        };
    }
    let Some(reason) = ask_reason(grant, request) else {
        return Admission::Run { approval: None };
    };
    if let Some(id) = table.allowance(&request.session, request.turn, &request.tool, now) {
        return Admission::Run {
            approval: Some((id, ApprovalScope::Allowance)),
        };
    }
    match table.mint(request, now) {
        Ok(id) => Admission::Ask(ApprovalAsk {
            id,
            tool: request.tool.clone(),
            // The parsed value written out, not the text as sent: what the owner reads is
            // what runs, however the text spelled it (a key given twice never gets here).
            arguments: arguments.to_string(),
            session: request.session.clone(),
            context: request.context,
            reason,
            expires_in_ms: table.expire_ms(),
        }),
        Err(full @ (MintError::Full { .. } | MintError::SessionFull { .. })) => Admission::Deny {
            reason: DenyReason::NotApproved,
            detail: full.to_string(),
            approval: None,
        },
        Err(e @ (MintError::NoId(_) | MintError::NotKept(_))) => Admission::Fail {
            message: e.to_string(),
        },
    }
}

/// Why `grant` asks the owner about `request`, in words for the owner; `None` when it does not.
pub fn ask_reason(grant: &Grant, request: &ToolRequest) -> Option<String> {
    let tool = &request.tool;
    if grant.approve == Approve::Always {
        return Some(format!(
            "{tool} asks the owner first (approve = \"always\")"
        ));
    }
    if !request.context.untrusted {
        return None;
    }
    // `approve = "when_untrusted"` sets `when_untrusted = "ask"`; a grant built without the
    // config's check still asks.
    let key = if grant.when_untrusted == WhenUntrusted::Ask {
        "when_untrusted = \"ask\""
    } else if grant.approve == Approve::WhenUntrusted {
        "approve = \"when_untrusted\""
    } else {
        return None;
    };
    Some(format!(
        "{tool} after untrusted text entered the session ({key})"
    ))
}

#[cfg(test)]
mod tests;
