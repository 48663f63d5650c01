//! The slots: each holds the tokens it has cached (last prompt + generated reply but its last
//! token) and is busy while it answers one request.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::tokenize::common_prefix_len;

/// The share of the prompt a slot's cache must match for the server to choose that slot by
/// prefix (llama-server's default `--slot-prompt-similarity`); below it, the least recently
/// used idle slot is taken (used = released; ties, such as never used slots, go to the
/// highest id, as llama-server's `get_available_slot` does).
pub const SLOT_PROMPT_SIMILARITY: f64 = 0.1;

#[derive(Debug, Default)]
struct SlotState {
    cache: Vec<String>,
    busy: bool,
    /// When the slot was last released, on the [`Inner::clock`] (0: never).
    last_used: u64,
}

#[derive(Debug)]
struct Inner {
    slots: Vec<SlotState>,
    /// Counts releases.
    clock: u64,
    /// The most slots busy at once so far.
    max_busy: usize,
}

/// What `/slots` shows of one slot.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotInfo {
    /// The slot id.
    pub id: usize,
    /// Whether it answers a request now.
    pub is_processing: bool,
    /// How many tokens it holds in its cache.
    pub n_cached_tokens: usize,
}

/// All slots of the server.
#[derive(Debug)]
pub struct Slots {
    inner: Mutex<Inner>,
    freed: Notify,
    /// Told each time a slot is taken.
    taken: Notify,
}

/// A slot held for one request; released (and its cache stored) when dropped.
#[derive(Debug)]
pub struct SlotLease {
    slots: Arc<Slots>,
    id: usize,
    cache: Vec<String>,
    /// Whether releasing it counts as a use for the least recently used choice (a chat
    /// request does; a slot action does not, as in llama-server).
    counts_as_use: bool,
}

impl Slots {
    /// `count` idle, empty slots (at least one).
    pub fn new(count: usize) -> Arc<Self> {
        let slots = (0..count.max(1)).map(|_| SlotState::default()).collect();
        Arc::new(Self {
            inner: Mutex::new(Inner {
                slots,
                clock: 0,
                max_busy: 0,
            }),
            freed: Notify::new(),
            taken: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The state of every slot.
    pub fn snapshot(&self) -> Vec<SlotInfo> {
        self.lock()
            .slots
            .iter()
            .enumerate()
            .map(|(id, s)| SlotInfo {
                id,
                is_processing: s.busy,
                n_cached_tokens: s.cache.len(),
            })
            .collect()
    }

    /// The most slots that were busy at once since the server started.
    pub fn max_busy(&self) -> usize {
        self.lock().max_busy
    }

    /// Waits until `n` slots have been busy at once, at most `limit`; whether they were.
    pub async fn wait_until_busy(&self, n: usize, limit: std::time::Duration) -> bool {
        let reached = async {
            loop {
                let taken = self.taken.notified();
                tokio::pin!(taken);
                taken.as_mut().enable();
                if self.max_busy() >= n {
                    return;
                }
                taken.await;
            }
        };
        tokio::time::timeout(limit, reached).await.is_ok()
    }

    /// Takes a slot for a request with this prompt, waiting until one is free.
    ///
    /// `id_slot = Some(k)` takes slot `k % n_slots`, waiting while it is busy; `None` takes
    /// the idle slot with the longest common prefix with `prompt` (ties: the lowest id), or,
    /// when no slot shares more than [`SLOT_PROMPT_SIMILARITY`] of the prompt, the least
    /// recently released idle one (ties: the highest id). Returns the lease and the common
    /// prefix length with the slot's cache.
    pub async fn acquire(
        self: &Arc<Self>,
        id_slot: Option<u64>,
        prompt: &[String],
    ) -> (SlotLease, usize) {
        self.wait_for(|slots| {
            let id = choose(slots, id_slot, prompt)?;
            let lcp = common_prefix_len(&slots[id].cache, prompt);
            Some((id, prompt.to_vec(), lcp))
        })
        .await
    }

    /// Takes slot `id_slot % n_slots` for a slot action (save, restore, erase), waiting
    /// while it is busy, as llama-server defers such a task until the slot is released.
    /// The lease starts with the slot's cache ([`SlotLease::cache`]), and releasing it does
    /// not count as a use of the slot (the least recently used choice is unchanged).
    pub async fn hold(self: &Arc<Self>, id_slot: u64) -> SlotLease {
        let (mut lease, ()) = self
            .wait_for(|slots| {
                let id = usize::try_from(id_slot % slots.len() as u64).unwrap_or(0);
                (!slots[id].busy).then(|| (id, slots[id].cache.clone(), ()))
            })
            .await;
        lease.counts_as_use = false;
        lease
    }

    /// Waits until `take` picks an idle slot (its id, the lease's starting cache and a
    /// value to hand back), marks it busy and leases it.
    async fn wait_for<T>(
        self: &Arc<Self>,
        mut take: impl FnMut(&[SlotState]) -> Option<(usize, Vec<String>, T)>,
    ) -> (SlotLease, T) {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut inner = self.lock();
                if let Some((id, cache, value)) = take(&inner.slots) {
                    inner.slots[id].busy = true;
                    let busy = inner.slots.iter().filter(|s| s.busy).count();
                    inner.max_busy = inner.max_busy.max(busy);
                    self.taken.notify_waiters();
                    let lease = SlotLease {
                        slots: Arc::clone(self),
                        id,
                        cache,
                        counts_as_use: true,
                    };
                    return (lease, value);
                }
            }
            freed.await;
        }
    }
}

fn choose(slots: &[SlotState], id_slot: Option<u64>, prompt: &[String]) -> Option<usize> {
    if let Some(k) = id_slot {
        let id = usize::try_from(k % slots.len() as u64).unwrap_or(0);
        return (!slots[id].busy).then_some(id);
    }
    let idle = || slots.iter().enumerate().filter(|(_, s)| !s.busy);
    let best = idle()
        .map(|(i, s)| (common_prefix_len(&s.cache, prompt), i))
        .filter(|(lcp, _)| *lcp > 0 && *lcp as f64 > SLOT_PROMPT_SIMILARITY * prompt.len() as f64)
        .max_by_key(|(lcp, i)| (*lcp, std::cmp::Reverse(*i)));
    match best {
        Some((_, id)) => Some(id),
        None => idle()
            .min_by_key(|(i, s)| (s.last_used, std::cmp::Reverse(*i)))
            .map(|(i, _)| i),
    }
}

impl SlotLease {
    /// The slot id.
    pub fn id(&self) -> usize {
        self.id
    }

    /// What the slot will hold once released: for a chat request the prompt (then what
    /// [`SlotLease::set_cache`] set), for a slot action the slot's cache when it was taken.
    pub fn cache(&self) -> &[String] {
        &self.cache
    }

    /// Sets what the slot holds once released: the prompt and the evaluated generated tokens.
    pub fn set_cache(&mut self, tokens: Vec<String>) {
        self.cache = tokens;
    }
}

impl Drop for SlotLease {
    fn drop(&mut self) {
        {
            let mut inner = self.slots.lock();
            if self.counts_as_use {
                inner.clock += 1;
                let clock = inner.clock;
                inner.slots[self.id].last_used = clock;
            }
            let slot = &mut inner.slots[self.id];
            slot.busy = false;
            slot.cache = std::mem::take(&mut self.cache);
        }
        self.slots.freed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::tokenize;

    #[tokio::test]
    async fn picks_longest_prefix_then_lru() {
        let slots = Slots::new(3);
        let a = tokenize("alpha beta");
        let (mut lease, _) = slots.acquire(Some(1), &a).await;
        lease.set_cache(a.clone());
        drop(lease);
        let (lease, lcp) = slots.acquire(None, &tokenize("alpha gamma")).await;
        assert_eq!((lease.id(), lcp), (1, 3));
        drop(lease);
        let (lease, lcp) = slots.acquire(None, &tokenize("zzz")).await;
        assert_eq!(
            (lease.id(), lcp),
            (2, 0),
            "never used: ties go to the highest id"
        );
    }

    #[tokio::test]
    async fn least_recently_released_is_chosen() {
        let slots = Slots::new(2);
        let prompt = tokenize("alpha beta");
        let (mut first, _) = slots.acquire(Some(0), &prompt).await;
        let (mut second, _) = slots.acquire(Some(1), &prompt).await;
        first.set_cache(prompt.clone());
        second.set_cache(prompt);
        // Slot 0 was taken first but is released last: slot 1 is the least recently used.
        drop(second);
        drop(first);
        let (lease, _) = slots.acquire(None, &tokenize("zzz")).await;
        assert_eq!(lease.id(), 1);
    }

    #[tokio::test]
    async fn waits_for_busy_slot() {
        let slots = Slots::new(1);
        let (lease, _) = slots.acquire(Some(0), &[]).await;
        let other = Arc::clone(&slots);
        let waiter = tokio::spawn(async move { other.acquire(Some(0), &[]).await.0.id() });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(lease);
        assert_eq!(waiter.await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_slot_action_waits_for_the_request_and_sees_its_cache() {
        let slots = Slots::new(2);
        let prompt = tokenize("alpha beta");
        let (mut lease, _) = slots.acquire(Some(1), &prompt).await;
        let other = Arc::clone(&slots);
        // 3 % 2 = slot 1, busy: the action waits until the request releases it.
        let waiter = tokio::spawn(async move { other.hold(3).await.cache().to_vec() });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        lease.set_cache(prompt.clone());
        drop(lease);
        assert_eq!(waiter.await.unwrap(), prompt);
    }

    #[tokio::test]
    async fn a_slot_action_does_not_count_as_a_use() {
        let slots = Slots::new(2);
        let (lease, _) = slots.acquire(Some(0), &[]).await;
        drop(lease);
        // Slot 1 was never used, so it is the least recently used one, before and after an
        // action on it; the action's cache stays.
        let mut held = slots.hold(1).await;
        held.set_cache(tokenize("restored"));
        drop(held);
        assert_eq!(slots.snapshot()[1].n_cached_tokens, 2);
        let (lease, _) = slots.acquire(None, &tokenize("zzz")).await;
        assert_eq!(lease.id(), 1);
    }
}
