//! Several model servers (issue 20): which endpoint and slot each role's calls go to.
//!
//! Each endpoint (`[[llama.endpoints]]`, or the one `[llama] url`) is watched (`watch`):
//! `/health`, and `/props` against `[expect]` and the reference every endpoint must match (the
//! same model and context size: a session may move between them). A session keeps to one
//! endpoint and main slot while that endpoint is healthy, so its prompt prefix stays cached
//! there (`sticky`); a session new to the router, or whose endpoint is not healthy, goes to
//! the healthy main slot fewest sessions keep to, and the move is logged (its prefix is
//! rebuilt there once). Background work and subagents go to a healthy endpoint serving their
//! role, the session's own first. With no healthy endpoint for a role, calls go to the first
//! that serves it and fail (or are retried) there as a single endpoint's would.

mod member;
mod sticky;
mod target;
#[cfg(test)]
mod tests;
mod watch;

pub use member::FAULT_HOLD_MS;
pub use sticky::MAX_STICKY_SESSIONS;
pub use target::{Target, Targets};
pub use watch::{StartError, start};

use crate::config::{Role, RoleSlots, Slots};
use crate::kv::SlotFiles;
use crate::llama::{Client, ServerInfo};
use bxcore::SessionId;
use member::Member;
use proto::api::{EndpointSlots, EndpointStatus};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use sticky::{Place, Sticky};
use tokio::sync::Semaphore;

/// A slot to run on and the gate to hold while running there.
#[derive(Debug, Clone)]
pub struct Lease {
    /// Where the calls go.
    pub target: Target,
    /// One permit: held while the task runs on the slot.
    pub gate: Arc<Semaphore>,
}

/// The endpoints and where each session's calls go.
#[derive(Debug)]
pub struct Router {
    members: Vec<Arc<Member>>,
    sticky: Mutex<Sticky>,
    /// What every endpoint must report: the first ready endpoint's `/props` (n_ctx, model).
    reference: ServerInfo,
    /// Turns routed so far ([`Router::main_for`] calls).
    routed: AtomicU64,
    /// The sessions' KV files (`[kv]`), when on.
    kv: Option<Arc<SlotFiles>>,
}

impl Router {
    /// One endpoint, taken as up with `info` and never watched: for tests and benches.
    pub fn single(client: Client, slots: &Slots, info: ServerInfo) -> Router {
        let name = crate::config::DEFAULT_ENDPOINT_NAME;
        Router::fixed(
            vec![(name.to_string(), client, RoleSlots::from(slots))],
            info,
        )
    }

    /// `endpoints` (name, client, slots by role), each taken as up with `info` and never
    /// watched: for tests and benches.
    pub fn fixed(endpoints: Vec<(String, Client, RoleSlots)>, info: ServerInfo) -> Router {
        let members = endpoints
            .into_iter()
            .map(|(name, client, slots)| {
                let url = client.options().endpoint.to_string();
                let member = Member::new(&name, &url, client, slots);
                member.mark_up(info.clone());
                Arc::new(member)
            })
            .collect();
        Router::with_members(members, info)
    }

    fn with_members(members: Vec<Arc<Member>>, reference: ServerInfo) -> Router {
        Router {
            members,
            sticky: Mutex::default(),
            reference,
            routed: AtomicU64::new(0),
            kv: None,
        }
    }

    /// This router with the sessions' KV files `kv` (none: sessions prefill after a switch).
    pub fn with_kv(mut self, kv: Option<SlotFiles>) -> Router {
        self.kv = kv.map(Arc::new);
        self
    }

    /// The sessions' KV files, when `[kv]` is on.
    pub fn kv(&self) -> Option<&SlotFiles> {
        self.kv.as_deref()
    }

    /// What every endpoint reports (the context size turns are planned for, the model).
    pub fn server(&self) -> &ServerInfo {
        &self.reference
    }

    fn sticky(&self) -> MutexGuard<'_, Sticky> {
        self.sticky.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where `session`'s turn runs: its place while that endpoint is healthy, else the
    /// healthy main slot fewest sessions keep to (logged as a move when it had a place).
    pub fn main_for(&self, session: &SessionId) -> Lease {
        self.routed.fetch_add(1, Ordering::SeqCst);
        let mut sticky = self.sticky();
        let before = sticky.get(session);
        let place = match before {
            // Its slot, or while another session's turn runs there, a free main slot of the
            // same endpoint (its cache follows it there through its KV file, `kv`).
            Some(home) if self.members[home.member].is_healthy() => {
                self.free_beside(home, &sticky).unwrap_or(home)
            }
            // Nowhere better: it waits where its prefix is cached.
            Some(place) if !self.any_healthy_for(Role::Main) => place,
            _ => self.least_loaded(&sticky),
        };
        sticky.used(place);
        if before != Some(place) {
            sticky.set(session, place);
        }
        drop(sticky);
        let member = &self.members[place.member];
        if let Some(from) = before.filter(|b| *b != place) {
            let old = &self.members[from.member];
            tracing::info!(
                %session,
                from = %old.name,
                from_slot = from.slot,
                to = %member.name,
                to_slot = place.slot,
                "the session moves to another endpoint or slot; its prompt prefix is rebuilt there once (restored from its KV file instead, when [kv] keeps one there)"
            );
        }
        Lease {
            target: self.target(place.member, place.slot),
            gate: member.gate(Role::Main, place.slot),
        }
    }

    /// The name of the endpoint `session`'s turns keep to; empty when it has none yet.
    pub fn home_of(&self, session: &SessionId) -> Arc<str> {
        match self.sticky().peek(session) {
            Some(place) => Arc::clone(&self.members[place.member].name),
            None => Arc::from(""),
        }
    }

    /// How many turns were routed so far (each [`Router::main_for`]).
    pub fn routed(&self) -> u64 {
        self.routed.load(Ordering::SeqCst)
    }

    /// Whether a turn may still start at `main` (a lease taken before a wait): its endpoint is
    /// healthy, or none that serves turns is.
    pub fn still_fit(&self, main: &Target) -> bool {
        let here = self.members.iter().find(|m| m.name == main.endpoint);
        here.is_some_and(|m| m.is_healthy()) || !self.any_healthy_for(Role::Main)
    }

    /// `home` when its gate is free; else the free main slot of the same endpoint used least
    /// recently; `None` when every one is busy (the session then waits for `home`). Never
    /// another endpoint: a KV file is where that endpoint's server wrote it.
    fn free_beside(&self, home: Place, sticky: &Sticky) -> Option<Place> {
        let member = &self.members[home.member];
        let free = |slot: u32| member.gate(Role::Main, slot).available_permits() > 0;
        if free(home.slot) {
            return Some(home);
        }
        member
            .slots
            .main
            .iter()
            .copied()
            .filter(|slot| *slot != home.slot && free(*slot))
            .map(|slot| Place {
                member: home.member,
                slot,
            })
            .min_by_key(|place| sticky.last_used(*place))
    }

    /// The healthy main slot fewest sessions keep to; any main slot when none is healthy.
    fn least_loaded(&self, sticky: &Sticky) -> Place {
        let places: Vec<Place> = self
            .members
            .iter()
            .enumerate()
            .flat_map(|(member, m)| {
                m.slots.main.iter().map(move |slot| Place {
                    member,
                    slot: *slot,
                })
            })
            .collect();
        let healthy: Vec<Place> = places
            .iter()
            .copied()
            .filter(|p| self.members[p.member].is_healthy())
            .collect();
        let pool = if healthy.is_empty() { places } else { healthy };
        pool.iter()
            .copied()
            .min_by_key(|p| sticky.load(*p))
            .unwrap_or(Place { member: 0, slot: 0 })
    }

    /// The member to run `role` on: `near` (an endpoint's name) when it serves the role and
    /// is healthy, else the first healthy one that serves it, else the first that serves it.
    fn member_for(&self, role: Role, near: &str) -> usize {
        let serving = || {
            self.members
                .iter()
                .enumerate()
                .filter(move |(_, m)| m.serves(role))
        };
        serving()
            .find(|(_, m)| &*m.name == near && m.is_healthy())
            .or_else(|| serving().find(|(_, m)| m.is_healthy()))
            .or_else(|| serving().next())
            .map_or(0, |(i, _)| i)
    }

    /// Where background work after a turn of endpoint `near` runs, and the gate to hold.
    pub fn background_near(&self, near: &str) -> Lease {
        let member = self.member_for(Role::Background, near);
        let m = &self.members[member];
        let slot = m.free_slot(Role::Background).unwrap_or(0);
        Lease {
            target: self.target(member, slot),
            gate: m.gate(Role::Background, slot),
        }
    }

    /// The targets of a task whose turn runs at `main`: its background work and children
    /// near it.
    pub fn targets(&self, main: &Target) -> Targets {
        let pick = |role: Role| {
            let member = self.member_for(role, &main.endpoint);
            let slot = self.members[member].free_slot(role).unwrap_or(0);
            self.target(member, slot)
        };
        Targets {
            main: main.clone(),
            background: pick(Role::Background),
            subagent: pick(Role::Subagent),
        }
    }

    fn target(&self, member: usize, slot: u32) -> Target {
        let m = &self.members[member];
        Target {
            client: m.client.clone(),
            slot,
            endpoint: Arc::clone(&m.name),
        }
    }

    fn any_healthy_for(&self, role: Role) -> bool {
        self.members
            .iter()
            .any(|m| m.serves(role) && m.is_healthy())
    }

    /// Whether some endpoint is healthy.
    pub fn any_healthy(&self) -> bool {
        self.members.iter().any(|m| m.is_healthy())
    }

    /// Each endpoint as `boxctl status` shows it.
    pub fn statuses(&self) -> Vec<EndpointStatus> {
        let sticky = self.sticky();
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let seen = m.seen().clone();
                let fault = m.client.faults().snapshot();
                let state = match (seen.up, m.is_faulted()) {
                    (true, false) => "up",
                    (true, true) => "failing",
                    (false, _) => "down",
                };
                let last_error = if fault.failing {
                    fault.last_error
                } else {
                    seen.last_error.or(fault.last_error)
                };
                EndpointStatus {
                    name: m.name.to_string(),
                    url: m.url.clone(),
                    state: state.to_string(),
                    model: seen.info.as_ref().map(|i| i.model.clone()),
                    n_ctx: seen.info.as_ref().map(|i| u64::from(i.n_ctx)),
                    total_slots: seen.info.as_ref().map(|i| u64::from(i.total_slots)),
                    slots: EndpointSlots {
                        main: m.slots.main.clone(),
                        background: m.slots.background.clone(),
                        subagent: m.slots.subagent.clone(),
                    },
                    sessions: sticky.sessions_on(i) as u64,
                    last_error,
                }
            })
            .collect()
    }
}
