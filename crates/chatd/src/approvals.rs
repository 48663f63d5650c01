//! Approvals in the room: a call waiting for the owner is posted with its exact arguments
//! (escaped as `boxctl approvals` shows them), and the owner answers with a reply to that post
//! (`approve`, `deny [reason]`) or a reaction (👍, 👎). Each post stands for one approval id in
//! one room; an answer counts once, from an owner, through loopd's `POST /v1/approvals/{id}`,
//! the path `boxctl approve` takes.

use crate::reply::cut;
use boxctl::safe_text::in_full;
use bxcore::{ApprovalId, DataClass};
use matrix_sdk::ruma::{OwnedEventId, OwnedRoomId};
use proto::api::{ApprovalAnswer, MAX_DENY_REASON_BYTES, OwnerAnswer, PendingApproval};
use std::sync::{Arc, Mutex};

/// Reactions that approve.
pub const APPROVE_KEYS: [&str; 3] = ["👍", "👍️", "✅"];
/// Reactions that deny.
pub const DENY_KEYS: [&str; 3] = ["👎", "👎️", "❌"];
/// The most posts of waiting calls remembered; past it the oldest is forgotten (it can still be
/// answered with `boxctl approve`).
pub const MAX_POSTED: usize = 256;

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

/// A posted call: what it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    /// The approval.
    pub approval: ApprovalId,
    /// The room it was posted in; an answer elsewhere does not count.
    pub room: OwnedRoomId,
}

/// What an answer to a post finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A call still to be decided: this answer decides it (the post is now answered).
    Open(Posted),
    /// A call already decided (here, on the box, or by its timeout).
    Decided(Posted),
    /// Not a post of a waiting call (or one forgotten past [`MAX_POSTED`]).
    NotAPost,
}

/// One post and whether its call is decided.
#[derive(Debug, Clone)]
struct Post {
    event: OwnedEventId,
    posted: Posted,
    decided: bool,
}

/// The posts of waiting calls, by the post's event id, decided ones too (a late answer to one is
/// told so, never taken for a task). Shared by the turns that post and the sync loop that reads
/// the answers.
#[derive(Debug, Clone, Default)]
pub struct Waiting {
    posts: Arc<Mutex<Vec<Post>>>,
}

impl Waiting {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Post>> {
        self.posts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers the post `event` of `posted` (the oldest is forgotten past [`MAX_POSTED`]).
    pub fn insert(&self, event: OwnedEventId, posted: Posted) {
        let mut posts = self.lock();
        if posts.len() >= MAX_POSTED {
            posts.remove(0);
        }
        posts.push(Post {
            event,
            posted,
            decided: false,
        });
    }

    /// Whether `event` is a post chatd made of a call (decided or not).
    pub fn is_post(&self, event: &OwnedEventId) -> bool {
        self.lock().iter().any(|p| &p.event == event)
    }

    /// What an answer to `event` finds; an open call is marked decided, so it is answered once.
    pub fn answer(&self, event: &OwnedEventId) -> Found {
        let mut posts = self.lock();
        match posts.iter_mut().find(|p| &p.event == event) {
            None => Found::NotAPost,
            Some(post) if post.decided => Found::Decided(post.posted.clone()),
            Some(post) => {
                post.decided = true;
                Found::Open(post.posted.clone())
            }
        }
    }

    /// Opens the post `event` again: loopd did not take the answer that decided it.
    pub fn reopen(&self, event: &OwnedEventId) {
        if let Some(post) = self.lock().iter_mut().find(|p| &p.event == event) {
            post.decided = false;
        }
    }

    /// Marks the posts of `approval` decided (its turn says so).
    pub fn decided(&self, approval: &ApprovalId) {
        for post in self.lock().iter_mut() {
            if &post.posted.approval == approval {
                post.decided = true;
            }
        }
    }

    /// How many posts are remembered.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }
}

#[cfg(test)]
mod tests;
