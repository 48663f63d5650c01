//! Approvals: the owner's answer to a call brokerd's policy asks about (`approve` and
//! `when_untrusted = "ask"` grants). brokerd mints an [`ApprovalId`] per asked call; loopd
//! records the request and the decision ([`ApprovalDecision`]) in the session log.

use crate::ValueError;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The longest approval id, in bytes.
pub const APPROVAL_ID_MAX_BYTES: usize = 64;

/// brokerd's name for one asked call: 1 to 64 bytes of `[A-Za-z0-9._-]`, not starting with
/// `.`. The owner types it (`boxctl approve ID`); brokerd binds it to the call's session,
/// tool and argument digest and accepts it once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ApprovalId(String);

impl ApprovalId {
    /// Checks `s` against the rules and wraps it.
    pub fn new(s: &str) -> Result<ApprovalId, ValueError> {
        crate::ids::check_name("approval id", s, APPROVAL_ID_MAX_BYTES)?;
        Ok(ApprovalId(s.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for ApprovalId {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<ApprovalId, ValueError> {
        ApprovalId::new(s)
    }
}

impl TryFrom<String> for ApprovalId {
    type Error = ValueError;
    fn try_from(s: String) -> Result<ApprovalId, ValueError> {
        ApprovalId::new(&s)
    }
}

impl From<ApprovalId> for String {
    fn from(id: ApprovalId) -> String {
        id.0
    }
}

/// What became of an asked call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// The owner approved this one call.
    Approved,
    /// The owner approved this call and every later call of the same tool in the same turn
    /// (brokerd asks again in the next turn).
    ApprovedForTurn,
    /// The owner denied it.
    Denied,
    /// Nobody answered before the wait ended (`[approvals] timeout_ms`, or the approval's
    /// expiry in brokerd): silence means no.
    TimedOut,
    /// The wait ended without an answer for another reason: the turn was cancelled, loopd or
    /// brokerd restarted. The call did not run.
    Void,
}

impl ApprovalDecision {
    /// Whether the call may run.
    pub fn approves(self) -> bool {
        matches!(
            self,
            ApprovalDecision::Approved | ApprovalDecision::ApprovedForTurn
        )
    }

    /// The word as written in logs and JSON (`approved`, `timed_out`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::Approved => "approved",
            ApprovalDecision::ApprovedForTurn => "approved_for_turn",
            ApprovalDecision::Denied => "denied",
            ApprovalDecision::TimedOut => "timed_out",
            ApprovalDecision::Void => "void",
        }
    }
}

impl fmt::Display for ApprovalDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn an_approval_id_is_checked_like_a_session_id() {
        assert!(ApprovalId::new("ap-3kq9x7m2v4").is_ok());
        for bad in ["", ".x", "a/b", "a b", &"x".repeat(65)] {
            assert!(ApprovalId::new(bad).is_err(), "{bad:?}");
        }
        assert!(serde_json::from_str::<ApprovalId>("\"../x\"").is_err());
    }

    #[test]
    fn only_the_two_approvals_let_a_call_run() {
        use ApprovalDecision::*;
        for d in [Approved, ApprovedForTurn] {
            assert!(d.approves());
        }
        for d in [Denied, TimedOut, Void] {
            assert!(!d.approves());
        }
        assert_eq!(
            serde_json::to_string(&ApprovedForTurn).unwrap(),
            "\"approved_for_turn\""
        );
    }
}
