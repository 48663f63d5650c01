//! Approvals in the room: a call waiting for the owner is posted with its exact arguments
//! (escaped as `boxctl approvals` shows them), and the owner answers with a reply to that post
//! (`approve`, `deny [reason]`) or a reaction (👍, 👎). Each post stands for one approval id in
//! one room; an answer counts once, from an owner, through loopd's `POST /v1/approvals/{id}`,
//! the path `boxctl approve` takes.

use crate::reply::cut;
use boxctl::safe_text::in_full;
use bxcore::DataClass;
use proto::api::{ApprovalAnswer, MAX_DENY_REASON_BYTES, OwnerAnswer, PendingApproval};

/// Reactions that approve.
pub const APPROVE_KEYS: [&str; 3] = ["👍", "👍️", "✅"];
/// Reactions that deny.
pub const DENY_KEYS: [&str; 3] = ["👎", "👎️", "❌"];

/// What the owner said to a posted call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatAnswer {
    /// Run it once.
    Approve,
    /// Do not run it; the reason, if one was given, reaches the model.
    Deny(Option<String>),
}

impl ChatAnswer {
    /// The body of loopd's `POST /v1/approvals/{id}`.
    pub fn to_api(&self) -> ApprovalAnswer {
        match self {
            ChatAnswer::Approve => ApprovalAnswer {
                answer: OwnerAnswer::Approve,
                reason: None,
            },
            ChatAnswer::Deny(reason) => ApprovalAnswer {
                answer: OwnerAnswer::Deny,
                reason: reason.clone(),
            },
        }
    }
}

/// The answer a reply's body gives, if it is one: `approve`, or `deny` and an optional reason
/// (cut to [`MAX_DENY_REASON_BYTES`]), case aside. Quoted lines (`> `, a client's fallback of
/// the message replied to) are left out.
pub fn answer_in_reply(body: &str) -> Option<ChatAnswer> {
    let own: Vec<&str> = body.lines().filter(|l| !l.starts_with('>')).collect();
    let text = own.join("\n");
    let text = text.trim();
    let (word, rest) = text
        .split_once(char::is_whitespace)
        .map_or((text, ""), |(w, r)| (w, r.trim()));
    match word.to_lowercase().as_str() {
        "approve" | "approved" | "yes" if rest.is_empty() => Some(ChatAnswer::Approve),
        "deny" | "denied" | "no" => Some(ChatAnswer::Deny(
            (!rest.is_empty()).then(|| cut(rest, MAX_DENY_REASON_BYTES)),
        )),
        _ => None,
    }
}

/// The answer a reaction's key gives, if it is one.
pub fn answer_in_reaction(key: &str) -> Option<ChatAnswer> {
    if APPROVE_KEYS.contains(&key) {
        Some(ChatAnswer::Approve)
    } else if DENY_KEYS.contains(&key) {
        Some(ChatAnswer::Deny(None))
    } else {
        None
    }
}

/// The post of `pending` for a room that may see up to `max_class`: the call whole, with how
/// to answer; or, where the session's context is labelled above it, only that a call waits
/// and where to decide (its arguments are made from data that must stay on the box).
pub fn request_text(pending: &PendingApproval, max_class: DataClass) -> String {
    let answer = "Reply to this message with `approve` or `deny <reason>`, or react 👍 or 👎.";
    if pending.class > max_class {
        return format!(
            "A call of {} waits for your approval ({}), but its session holds data above what \
             this room may see: decide on the box with `boxctl approvals`.",
            in_full(&pending.tool),
            pending.id
        );
    }
    format!(
        "Approval needed ({id}): {tool}\narguments: {args}\nwhy: {reason}\n{untrusted}{answer}",
        id = pending.id,
        tool = in_full(&pending.tool),
        args = in_full(&pending.arguments),
        reason = in_full(&pending.reason),
        untrusted = if pending.untrusted {
            "The session has read untrusted data: check the arguments.\n"
        } else {
            ""
        },
    )
}

#[cfg(test)]
mod tests;
