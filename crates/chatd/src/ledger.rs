//! The tasks chatd handed to loopd whose answers are not posted yet, and the last ones whose
//! answers are (`state_dir/tasks.json`, replaced whole at each change). After a crash, a message
//! read again whose answer was posted is left alone; one handed over but not answered is
//! followed again, and its answer read back from the log (`history`); and at the start every
//! task still unanswered is followed again, even if its message is not read again.

use crate::error::ChatError;
use crate::store::Store;
use bxcore::{SessionId, TaskId};
use serde::{Deserialize, Serialize};
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};

/// The ledger's file in the state directory, and what it is called in errors.
const FILE: &str = "tasks.json";
const WHAT: &str = "the tasks handed over";
/// The most tasks kept as handed over and unanswered; past it the oldest is forgotten.
pub const MAX_HANDED: usize = 256;
/// The most answered tasks remembered.
pub const MAX_ANSWERED: usize = 1_024;

/// A task handed to loopd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handed {
    /// The room it came from.
    pub room: String,
    /// Its session.
    pub session: SessionId,
    /// Its id.
    pub task_id: TaskId,
    /// Its text (handed again, loopd finds the task by its id).
    pub text: String,
    /// What others said in the room before it (`heard`), handed with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overheard: Vec<proto::api::OverheardText>,
}

/// What `tasks.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    /// Handed over, not answered yet.
    pub handed: Vec<Handed>,
    /// Answered, the newest last.
    pub answered: VecDeque<TaskId>,
}

/// The ledger, shared by the sync loop and the turns it follows, with the tasks this process
/// follows now (not kept: a restart follows none).
#[derive(Debug, Clone)]
pub struct Tasks {
    store: Store,
    ledger: Arc<Mutex<Ledger>>,
    following: Arc<Mutex<HashSet<TaskId>>>,
}

impl Tasks {
    /// The ledger kept in `store`.
    pub fn load(store: Store) -> Result<Tasks, ChatError> {
        let ledger = store.read_json(WHAT, FILE)?.unwrap_or_default();
        Ok(Tasks {
            store,
            ledger: Arc::new(Mutex::new(ledger)),
            following: Arc::new(Mutex::new(HashSet::new())),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `task` followed by this process; false when it already is (a message read again
    /// while its turn is followed since the restart).
    pub fn follow(&self, task: &TaskId) -> bool {
        self.following
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(task.clone())
    }

    /// `task` is no longer followed.
    pub fn unfollow(&self, task: &TaskId) {
        self.following
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(task);
    }

    /// Whether `task`'s answer was posted.
    pub fn answered(&self, task: &TaskId) -> bool {
        self.lock().answered.contains(task)
    }

    /// Whether `task` was handed over before (and not answered).
    pub fn was_handed(&self, task: &TaskId) -> bool {
        self.lock().handed.iter().any(|h| &h.task_id == task)
    }

    /// Every task handed over and not answered.
    pub fn unanswered(&self) -> Vec<Handed> {
        self.lock().handed.clone()
    }

    /// Keeps that `handed` was handed over.
    pub fn hand(&self, handed: Handed) -> Result<(), ChatError> {
        let mut ledger = self.lock();
        if ledger.handed.iter().any(|h| h.task_id == handed.task_id) {
            return Ok(());
        }
        if ledger.handed.len() >= MAX_HANDED {
            ledger.handed.remove(0);
        }
        ledger.handed.push(handed);
        self.store.write_json(WHAT, FILE, &*ledger)
    }

    /// Keeps that `task`'s answer was posted.
    pub fn answer(&self, task: &TaskId) -> Result<(), ChatError> {
        let mut ledger = self.lock();
        ledger.handed.retain(|h| &h.task_id != task);
        if !ledger.answered.contains(task) {
            if ledger.answered.len() >= MAX_ANSWERED {
                ledger.answered.pop_front();
            }
            ledger.answered.push_back(task.clone());
        }
        self.store.write_json(WHAT, FILE, &*ledger)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn handed(n: usize) -> Handed {
        Handed {
            room: "!a:hs".into(),
            session: SessionId::new("matrix-1").unwrap(),
            task_id: TaskId::new(&format!("mx-{n}")).unwrap(),
            text: format!("task {n}"),
            overheard: Vec::new(),
        }
    }

    #[test]
    fn a_task_goes_from_handed_to_answered_and_both_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s")).unwrap();
        let tasks = Tasks::load(store.clone()).unwrap();
        let one = handed(1);
        tasks.hand(one.clone()).unwrap();
        tasks.hand(one.clone()).unwrap();
        tasks.hand(handed(2)).unwrap();
        assert!(tasks.was_handed(&one.task_id));
        tasks.answer(&one.task_id).unwrap();
        let again = Tasks::load(store).unwrap();
        assert!(again.answered(&one.task_id));
        assert!(!again.was_handed(&one.task_id));
        assert_eq!(again.unanswered(), [handed(2)]);
    }

    #[test]
    fn the_ledger_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = Tasks::load(Store::open(&dir.path().join("s")).unwrap()).unwrap();
        for n in 0..=MAX_HANDED {
            tasks.hand(handed(n)).unwrap();
        }
        assert_eq!(tasks.unanswered().len(), MAX_HANDED);
        assert!(!tasks.was_handed(&handed(0).task_id));
    }
}
