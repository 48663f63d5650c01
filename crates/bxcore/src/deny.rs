//! Why the broker refuses a tool call, and how the refusal reads to the model.

use serde::{Deserialize, Serialize};

/// Why a tool call was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenyReason {
    /// No grant lets this session call this tool.
    NoGrant,
    /// The arguments do not fit the tool's schema or limits.
    InvalidArguments,
    /// The context holds data of a class the call may not carry out.
    Egress,
    /// The context is untrusted and the tool has side effects.
    UntrustedContext,
    /// A path outside the roots the grant allows.
    PathNotAllowed,
    /// A host outside the hosts the grant allows.
    HostNotAllowed,
    /// Too many calls of this tool in this turn.
    RateLimit,
    /// No tool of that name exists.
    UnknownTool,
    /// The grant asks the owner first, and the owner denied the call, did not answer in time,
    /// or the wait was void (loopd's words then say which).
    NotApproved,
    /// The call came with an approval brokerd does not accept: one it never minted (or minted
    /// before a restart), one used already, one for another session, tool or arguments, or
    /// one that expired.
    ApprovalRefused,
    /// The request would carry one of brokerd's secrets (in any encoding it looks for) where
    /// no grant attaches it: in a URL, a header the grant did not set, a body, an `exec` argv
    /// or stdin with network, or an MCP tool's arguments.
    Leak,
}

impl DenyReason {
    /// The sentence that explains the refusal, without a final full stop.
    fn sentence(self) -> &'static str {
        match self {
            DenyReason::NoGrant => "Denied: no grant allows this session to call this tool",
            DenyReason::InvalidArguments => "Denied: the arguments are not valid for this tool",
            DenyReason::Egress => {
                "Denied: the conversation holds data that this tool may not send out"
            }
            DenyReason::UntrustedContext => {
                "Denied: the conversation holds untrusted content, and this tool may not run while it does"
            }
            DenyReason::PathNotAllowed => "Denied: the path is outside the allowed paths",
            DenyReason::HostNotAllowed => "Denied: the host is not on the allowed hosts",
            DenyReason::RateLimit => "Denied: this tool was called too often in this turn",
            DenyReason::UnknownTool => "Denied: there is no tool of that name",
            DenyReason::NotApproved => "Denied: the owner did not approve this call",
            DenyReason::ApprovalRefused => {
                "Denied: the approval does not hold for this call (unknown, used, for another call, or expired)"
            }
            DenyReason::Leak => {
                "Denied: the request would send a secret out; secrets go only where the owner's grants attach them"
            }
        }
    }
}

/// The text the model gets for a refusal: one sentence per reason, then the detail.
///
/// `InvalidArguments` with detail `d` reads `Denied: the arguments are not valid for this tool: d.`
pub fn denial_message(reason: DenyReason, detail: Option<&str>) -> String {
    match detail.map(str::trim).filter(|d| !d.is_empty()) {
        Some(detail) => format!("{}: {}.", reason.sentence(), detail.trim_end_matches('.')),
        None => format!("{}.", reason.sentence()),
    }
}
