//! The posts of calls waiting for the owner (`state_dir/posts.json`, replaced whole when a
//! post is added): which approval each post stands for, in which room. Kept across a restart
//! of chatd, so an answer to a post made before it still decides its call. Whether a call is
//! decided is not kept: loopd is the judge of that (an answer to a call it no longer waits
//! for is told so), and a post is answered at most once per process.

use crate::error::ChatError;
use crate::store::Store;
use bxcore::ApprovalId;
use matrix_sdk::ruma::{OwnedEventId, OwnedRoomId};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The most posts of waiting calls remembered; past it the oldest is forgotten (it can still be
/// answered with `boxctl approve`).
pub const MAX_POSTED: usize = 256;
/// The file in the state directory, and what it is called in errors.
const FILE: &str = "posts.json";
const WHAT: &str = "the posts of waiting calls";

/// A posted call: what it stands for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Post {
    event: OwnedEventId,
    posted: Posted,
    #[serde(skip)]
    decided: bool,
}

/// The posts of waiting calls, by the post's event id, decided ones too (a late answer to one is
/// told so, never taken for a task). Shared by the turns that post and the sync loop that reads
/// the answers.
#[derive(Debug, Clone, Default)]
pub struct Waiting {
    posts: Arc<Mutex<Vec<Post>>>,
    /// Where they are kept; none in tests of the logic alone.
    store: Option<Store>,
    /// The calls being posted now (not kept).
    claimed: Arc<Mutex<HashSet<ApprovalId>>>,
}

impl Waiting {
    /// The posts `store` keeps, each open until an answer or its turn decides it.
    pub fn load(store: Store) -> Result<Waiting, ChatError> {
        let mut posts: Vec<Post> = store.read_json(WHAT, FILE)?.unwrap_or_default();
        let over = posts.len().saturating_sub(MAX_POSTED);
        posts.drain(..over);
        Ok(Waiting {
            posts: Arc::new(Mutex::new(posts)),
            store: Some(store),
            claimed: Arc::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Post>> {
        self.posts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers the post `event` of `posted` (the oldest is forgotten past [`MAX_POSTED`]);
    /// kept on disk when this returns, unless that failed (logged: the post is then known
    /// only until chatd stops).
    pub fn insert(&self, event: OwnedEventId, posted: Posted) {
        let mut posts = self.lock();
        if posts.len() >= MAX_POSTED {
            posts.remove(0);
        }
        self.claimed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&posted.approval);
        posts.push(Post {
            event,
            posted,
            decided: false,
        });
        if let Some(store) = &self.store
            && let Err(error) = store.write_json(WHAT, FILE, &*posts)
        {
            tracing::error!(%error, "cannot keep a post of a waiting call; after a restart, answer it with boxctl approve");
        }
    }

    /// Whether `event` is a post chatd made of a call (decided or not).
    pub fn is_post(&self, event: &OwnedEventId) -> bool {
        self.lock().iter().any(|p| &p.event == event)
    }

    /// Takes the posting of `approval` for the caller: false when it has a post or another
    /// caller is posting it. Given back by [`Waiting::insert`] or [`Waiting::unclaim`].
    pub fn claim(&self, approval: &ApprovalId) -> bool {
        let posts = self.lock();
        let mut claimed = self.claimed.lock().unwrap_or_else(|p| p.into_inner());
        !posts.iter().any(|p| &p.posted.approval == approval) && claimed.insert(approval.clone())
    }

    /// Gives back the posting of `approval`, which failed.
    pub fn unclaim(&self, approval: &ApprovalId) {
        let mut claimed = self.claimed.lock().unwrap_or_else(|p| p.into_inner());
        claimed.remove(approval);
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
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use matrix_sdk::ruma::{EventId, RoomId};

    fn posted() -> Posted {
        Posted {
            approval: ApprovalId::new("ap-7").unwrap(),
            room: RoomId::parse("!a:hs").unwrap(),
        }
    }

    #[test]
    fn a_post_is_answered_once_and_remembered_after() {
        let waiting = Waiting::default();
        let post = EventId::parse("$post1").unwrap();
        let posted = Posted {
            approval: ApprovalId::new("ap-7").unwrap(),
            room: RoomId::parse("!a:hs").unwrap(),
        };
        waiting.insert(post.clone(), posted.clone());
        assert!(waiting.is_post(&post));
        assert_eq!(waiting.answer(&post), Found::Open(posted.clone()));
        assert_eq!(
            waiting.answer(&post),
            Found::Decided(posted.clone()),
            "once"
        );
        waiting.reopen(&post);
        assert_eq!(waiting.answer(&post), Found::Open(posted.clone()));
        let other = EventId::parse("$post2").unwrap();
        waiting.insert(other.clone(), posted.clone());
        waiting.decided(&posted.approval);
        assert_eq!(waiting.answer(&other), Found::Decided(posted.clone()));
        assert!(waiting.is_post(&other), "a decided post is still known");
        assert_eq!(
            waiting.answer(&EventId::parse("$x").unwrap()),
            Found::NotAPost
        );
        for n in 0..=MAX_POSTED {
            waiting.insert(EventId::parse(format!("$p{n}")).unwrap(), posted.clone());
        }
        assert_eq!(waiting.len(), MAX_POSTED);
        assert!(!waiting.is_post(&EventId::parse("$p0").unwrap()));
    }

    #[test]
    fn a_call_is_posted_by_one_caller_at_a_time_and_again_only_after_a_failure() {
        let waiting = Waiting::default();
        let approval = posted().approval;
        assert!(waiting.claim(&approval));
        assert!(!waiting.claim(&approval), "another task is posting it");
        waiting.unclaim(&approval);
        assert!(
            waiting.claim(&approval),
            "the post failed: it may be tried again"
        );
        waiting.insert(EventId::parse("$p").unwrap(), posted());
        assert!(!waiting.claim(&approval), "it has a post");
    }

    #[test]
    fn a_post_outlives_a_restart_open_whatever_this_process_decided() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let first = Waiting::load(Store::open(&state).unwrap()).unwrap();
        let post = EventId::parse("$post1").unwrap();
        first.insert(post.clone(), posted());
        assert_eq!(first.answer(&post), Found::Open(posted()));
        let again = Waiting::load(Store::open(&state).unwrap()).unwrap();
        assert!(!again.claim(&posted().approval), "it has a post");
        assert_eq!(again.answer(&post), Found::Open(posted()));
    }
}
