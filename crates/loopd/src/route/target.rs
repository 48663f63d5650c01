//! Where a task's model calls go: one endpoint's client and slot for each role.

use crate::config::Slots;
use crate::llama::Client;
use std::sync::Arc;

/// Where one role's model calls go: an endpoint's client and a slot on it.
#[derive(Debug, Clone)]
pub struct Target {
    /// The endpoint's client.
    pub client: Client,
    /// The slot (`id_slot`) the calls run on.
    pub slot: u32,
    /// The endpoint's name, for logs.
    pub endpoint: Arc<str>,
}

/// The targets of one task's roles: its turn, its background work, its children.
#[derive(Debug, Clone)]
pub struct Targets {
    /// The turn's calls.
    pub main: Target,
    /// Summaries and compaction.
    pub background: Target,
    /// Child sessions' turns.
    pub subagent: Target,
}

impl Targets {
    /// Every role on `client`, on the slots `[slots]` names: one endpoint, as in tests.
    pub fn of(client: &Client, slots: &Slots) -> Targets {
        let on = |slot| Target {
            client: client.clone(),
            slot,
            endpoint: Arc::from(crate::config::DEFAULT_ENDPOINT_NAME),
        };
        Targets {
            main: on(slots.main.first()),
            background: on(slots.background),
            subagent: on(slots.subagent),
        }
    }

    /// The targets of a child session: its turns run where this task's subagents go.
    pub fn for_child(&self) -> Targets {
        Targets {
            main: self.subagent.clone(),
            background: self.background.clone(),
            subagent: self.subagent.clone(),
        }
    }
}
