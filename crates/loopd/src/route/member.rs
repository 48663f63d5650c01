//! One endpoint as the router holds it: its client, its slots by role with a gate on each
//! slot a task holds while it runs there, and what the watcher last found.

use crate::config::{Role, RoleSlots};
use crate::llama::{Client, ServerInfo};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Semaphore;

/// How long a failed call keeps new turns off an endpoint, in milliseconds, whatever the looks
/// at it say: a server whose GPU hangs still answers `/health` and `/props`. A call that
/// succeeds there ends it at once.
pub const FAULT_HOLD_MS: u64 = 60_000;

/// What the watcher last found at an endpoint.
#[derive(Debug, Clone, Default)]
pub(super) struct Seen {
    /// `/health` answered ok and `/props` matched the config at the last look.
    pub up: bool,
    /// What `/props` said at the last look that reached it.
    pub info: Option<ServerInfo>,
    /// Why it is not up (the last probe's error, or what did not match); kept after it is up
    /// again, as the last error `boxctl status` shows.
    pub last_error: Option<String>,
}

/// One endpoint.
#[derive(Debug)]
pub(super) struct Member {
    /// Its name.
    pub name: Arc<str>,
    /// Its URL as configured.
    pub url: String,
    /// Its client; the client's faults say when a call failed since the last good look.
    pub client: Client,
    /// Its slots by role.
    pub slots: RoleSlots,
    /// One gate (one permit) per main and background slot: one task runs on a slot at a
    /// time, the others wait here, not in llama-server's queue where their timeouts run.
    gates: Vec<(Role, u32, Arc<Semaphore>)>,
    /// The next subagent slot to hand out: children hold no gate, so they take the slots in
    /// turn rather than all queueing on the first.
    next_subagent: AtomicUsize,
    seen: Mutex<Seen>,
}

impl Member {
    /// An endpoint not yet looked at (down until the watcher finds it up).
    pub fn new(name: &str, url: &str, client: Client, slots: RoleSlots) -> Member {
        let gates = [Role::Main, Role::Background]
            .into_iter()
            .flat_map(|role| {
                slots
                    .of(role)
                    .iter()
                    .map(move |slot| (role, *slot, Arc::new(Semaphore::new(1))))
            })
            .collect();
        Member {
            name: Arc::from(name),
            url: url.to_string(),
            client,
            slots,
            gates,
            next_subagent: AtomicUsize::new(0),
            seen: Mutex::new(Seen::default()),
        }
    }

    /// What the watcher last found.
    pub fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Up at the last look, and no call failed there within [`FAULT_HOLD_MS`].
    pub fn is_healthy(&self) -> bool {
        self.seen().up && !self.is_faulted()
    }

    /// A call failed there within [`FAULT_HOLD_MS`] and none has succeeded since.
    pub fn is_faulted(&self) -> bool {
        let fault = self.client.faults().snapshot();
        fault.failing
            && fault
                .since
                .is_some_and(|at| at.elapsed().as_millis() < u128::from(FAULT_HOLD_MS))
    }

    /// Whether it serves `role`.
    pub fn serves(&self, role: Role) -> bool {
        !self.slots.of(role).is_empty()
    }

    /// The gate of `role`'s `slot`; a slot of no gated role shares a fresh gate (never held).
    pub fn gate(&self, role: Role, slot: u32) -> Arc<Semaphore> {
        self.gates
            .iter()
            .find(|(r, s, _)| *r == role && *s == slot)
            .map(|(_, _, gate)| Arc::clone(gate))
            .unwrap_or_else(|| Arc::new(Semaphore::new(1)))
    }

    /// The `role` slot whose gate is free, else its first (a task then waits for it); for
    /// subagents, which hold no gate, the next slot in turn.
    pub fn free_slot(&self, role: Role) -> Option<u32> {
        let slots = self.slots.of(role);
        if role == Role::Subagent && !slots.is_empty() {
            let turn = self.next_subagent.fetch_add(1, Ordering::Relaxed);
            return Some(slots[turn % slots.len()]);
        }
        slots
            .iter()
            .find(|slot| self.gate(role, **slot).available_permits() > 0)
            .or(slots.first())
            .copied()
    }

    /// Records a look that found it up with `info` (a call's fault still holds: see
    /// [`FAULT_HOLD_MS`]).
    pub fn mark_up(&self, info: ServerInfo) {
        let mut seen = self.seen();
        seen.up = true;
        seen.info = Some(info);
    }

    /// Records a look that found it down, and why.
    pub fn mark_down(&self, why: String) {
        let mut seen = self.seen();
        seen.up = false;
        seen.last_error = Some(why);
    }
}
