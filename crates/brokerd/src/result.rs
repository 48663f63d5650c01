//! From what a tool gave back to the [`ToolResponse`] loopd gets: results capped and labelled
//! by the grant, tool errors turned into denials or failures.

use crate::config::Grant;
use crate::tool::{ToolError, ToolOutput};
use bxcore::{DenyReason, Labels};
use proto::ToolResponse;

/// The marker [`cap_result`] appends when it cuts (as loopd's).
pub const TRUNCATED_MARKER: &str = "\n[truncated]";

/// Cuts `text` to at most `cap_bytes` bytes on a character boundary and appends
/// [`TRUNCATED_MARKER`] if it cut; says whether it did. The marker comes on top of the cap (as
/// in loopd), so a cut result is at most `cap_bytes + 12` bytes; text of exactly `cap_bytes`
/// bytes is kept whole.
pub fn cap_result(mut text: String, cap_bytes: usize) -> (String, bool) {
    if text.len() <= cap_bytes {
        return (text, false);
    }
    let mut end = cap_bytes;
    // Byte 0 is always a boundary, so this stops.
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(TRUNCATED_MARKER);
    (text, true)
}

/// `output` capped to `cap_bytes` and labelled with `grant`'s `result_class` and
/// `result_untrusted`; truncated if the tool or the cap cut it.
pub fn labelled(output: ToolOutput, grant: &Grant, cap_bytes: usize) -> ToolResponse {
    let (content, cut) = cap_result(output.content, cap_bytes);
    ToolResponse::Result {
        content,
        class: grant.result_class,
        untrusted: grant.result_untrusted,
        truncated: output.truncated || cut,
    }
}

/// The label a grant gives whatever its tool says: results, and failures and refusals alike.
pub fn grant_labels(grant: &Grant) -> Labels {
    Labels::new(grant.result_class, grant.result_untrusted)
}

/// A refusal from a tool's [`crate::tool::Tool::check`], made of the arguments and the grant
/// alone: the same denials and failures as [`from_error`], but unlabelled, like the broker's
/// own policy (nothing the tool could read went into it).
pub fn refused(error: ToolError) -> ToolResponse {
    match error {
        ToolError::InvalidArguments(detail) => {
            ToolResponse::denied(DenyReason::InvalidArguments, Some(detail))
        }
        ToolError::PathNotAllowed(detail) => {
            ToolResponse::denied(DenyReason::PathNotAllowed, Some(detail))
        }
        ToolError::HostNotAllowed(detail) => {
            ToolResponse::denied(DenyReason::HostNotAllowed, Some(detail))
        }
        ToolError::Failed(message) => ToolResponse::failed(message),
        ToolError::Leak { detail, .. } => ToolResponse::denied(DenyReason::Leak, Some(detail)),
    }
}

/// A tool's error as loopd gets it: argument, path and host errors are denials (with the
/// tool's text as the detail), anything else a failure. Either way it carries `grant`'s
/// labels: the tool wrote or shaped that text (an MCP server's error, a page's redirect), and
/// even that it failed can say something about what it read.
pub fn from_error(error: ToolError, grant: &Grant) -> ToolResponse {
    let labels = Some(grant_labels(grant));
    let denied = |reason, detail: String| ToolResponse::Denied {
        reason,
        detail: Some(detail),
        labels,
    };
    match error {
        ToolError::InvalidArguments(detail) => denied(DenyReason::InvalidArguments, detail),
        ToolError::PathNotAllowed(detail) => denied(DenyReason::PathNotAllowed, detail),
        ToolError::HostNotAllowed(detail) => denied(DenyReason::HostNotAllowed, detail),
        ToolError::Failed(message) => ToolResponse::Failed { message, labels },
        ToolError::Leak { detail, .. } => denied(DenyReason::Leak, detail),
    }
}
