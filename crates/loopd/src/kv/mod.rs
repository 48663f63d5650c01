//! Each session's KV cache kept in a file between its turns (issue 22, `docs/kv.md`).
//!
//! Sessions take turns on a slot: the heartbeat, a schedule's run and the owner's sessions
//! all share the main slot, and each switch used to throw the last session's cache away and
//! prefill the next one's whole context. Now loopd knows which session each slot last ran
//! (`holders`); after a turn of Y on a slot other sessions use too it asks llama-server to
//! save the slot to Y's file (after the turn's `ended`, holding the slot, so the save is on
//! no turn's path unless another turn already waits for the slot); before a turn of X on a
//! slot that last held Y it saves Y only when that was not done, then restores X's file when
//! it has one made for X's current epoch (its baseline's digest), on this model and slot size. A file that does not match is
//! deleted, never used; a restore that fails leaves the slot empty, and the turn prefills as
//! before (logged). After a compaction the session's file is dropped. The files
//! (`files`) count against `[kv] max_bytes` and `max_files`, least recently used removed
//! first. At shutdown every slot's holder is saved, so a restarted loopd finds them warm.
//!
//! Tokens decide what a restored cache is used for: llama-server reuses only the common prefix
//! of the cached tokens and the new prompt, so an older file of the right session and epoch
//! costs some prefill, never a wrong answer. What must never happen is a cache of another
//! model (llama-server restores one whose shapes match without complaint): the note's model
//! and slot size are checked first.

mod costs;
mod files;
mod holders;

pub use costs::{Choice, Costs};
pub use files::{KV_SUFFIX, KV_TEMP_SUFFIX, Note, name_of};
use holders::{Held, Holders};
pub use holders::{Occupant, Place};

use crate::config::Kv;
use crate::llama::{Client, InferError, ServerInfo};
use bxcore::{ModelTimings, SessionId};
use files::Pair;
use proto::api::KvStatus;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// What happened before a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warmth {
    /// The slot last ran this session: its cache is there.
    Kept,
    /// The session's file was restored into the slot.
    Restored,
    /// Nothing to restore (no file, or one that did not match): the turn prefills.
    Cold,
    /// The restore failed: the slot is empty and the turn prefills.
    Failed,
    /// Not used for this endpoint (not in `[kv] endpoints`, or its server has no
    /// `--slot-save-path`).
    Off,
    /// Not used for this endpoint because prefilling costs less than a save and a restore
    /// there (`costs`): nothing was saved or restored, and the turn prefills.
    Prefill,
}

#[derive(Debug, Default)]
struct Counts {
    saves: AtomicU64,
    save_failures: AtomicU64,
    restores: AtomicU64,
    misses: AtomicU64,
    restore_failures: AtomicU64,
    saves_after_turn: AtomicU64,
}

/// The KV files of the endpoints in `[kv] endpoints`.
#[derive(Debug)]
pub struct SlotFiles {
    dir: PathBuf,
    endpoints: Vec<String>,
    max_bytes: u64,
    max_files: usize,
    /// `[kv] save_after_turn`: a holder's file is saved after its turn, not at the switch.
    save_after_turn: bool,
    /// What every endpoint reports: a file is restored only on the model and slot size it
    /// was made on.
    server: ServerInfo,
    holders: Mutex<Holders>,
    /// Endpoints whose server answered that it has no `--slot-save-path` (501).
    off: Mutex<HashSet<String>>,
    /// What files and prefill cost, per endpoint.
    costs: Mutex<HashMap<String, Costs>>,
    counts: Counts,
}

/// Microseconds since `started`.
fn elapsed_us(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

fn now_ms() -> u64 {
    bxcore::Timestamp::now().unix_seconds().max(0) as u64 * 1000
}

impl SlotFiles {
    /// The files of `[kv]` in `dir_in(state_dir)` (made when missing), on servers reporting
    /// `server`; what a crash left is removed and the limits applied now. `None` when `[kv]`
    /// is off.
    pub fn open(
        kv: &Kv,
        state_dir: &Path,
        server: &ServerInfo,
    ) -> std::io::Result<Option<SlotFiles>> {
        if !kv.enabled || kv.endpoints.is_empty() {
            return Ok(None);
        }
        let dir = kv.dir_in(state_dir);
        if !dir.is_dir() {
            // The files hold what sessions said: for loopd's user (and llama-server, which
            // runs as the same user under boxd) alone. A directory that exists keeps the
            // mode its owner gave it (a group shared with a llama-server of its own user).
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)?;
        }
        let files = SlotFiles {
            dir,
            endpoints: kv.endpoints.clone(),
            max_bytes: kv.max_bytes,
            max_files: kv.max_files,
            save_after_turn: kv.save_after_turn,
            server: server.clone(),
            holders: Mutex::default(),
            off: Mutex::default(),
            costs: Mutex::default(),
            counts: Counts::default(),
        };
        files::clean(&files.dir);
        files.prune();
        Ok(Some(files))
    }

    /// Where the files are.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn holders(&self) -> MutexGuard<'_, Holders> {
        self.holders.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn serves(&self, endpoint: &str) -> bool {
        self.endpoints.iter().any(|e| e == endpoint)
            && !self
                .off
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(endpoint)
    }

    fn costs(&self) -> MutexGuard<'_, HashMap<String, Costs>> {
        self.costs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Files or prefill at a switch on `endpoint`, from what was measured there.
    pub fn choice(&self, endpoint: &str) -> Choice {
        self.costs()
            .get(endpoint)
            .map_or(Choice::Measuring, Costs::choice)
    }

    /// A model call on `endpoint` reported `timings`: its prefill speed counts toward the
    /// choice between files and prefill there.
    pub fn prefilled(&self, endpoint: &str, timings: &ModelTimings) {
        if self.serves(endpoint) {
            self.costs()
                .entry(endpoint.to_owned())
                .or_default()
                .prefilled(timings.prompt_n, timings.prompt_ms);
        }
    }

    fn pair(&self, session: &SessionId) -> Pair {
        Pair::new(&self.dir, &name_of(session))
    }

    /// Before a turn of `now` at `place` (through `client`): the slot's last session saved
    /// when it was another and its file was not saved after its turn, then `now`'s file
    /// restored when it matches. `now` becomes the slot's holder.
    pub async fn before_turn(&self, place: &Place, client: &Client, now: Occupant) -> Warmth {
        if !self.serves(&place.endpoint) {
            return Warmth::Off;
        }
        let before = self.holders().take(place, client, &now);
        if matches!(&before, Some(held) if held.occupant.session == now.session) {
            return Warmth::Kept;
        }
        if self.choice(&place.endpoint) == Choice::Prefill {
            // The file would cost more than the prefill it spares.
            return Warmth::Prefill;
        }
        if let Some(held) = before
            && !self.saved_already(&held)
        {
            self.save(place, &held.client, &held.occupant).await;
        }
        if !self.serves(&place.endpoint) {
            return Warmth::Off;
        }
        self.restore(place, client, &now).await
    }

    /// After a turn, its `ended` sent and the slot still held: the slot holds `now` as it is
    /// at the turn's end (its epoch may have moved on: a compaction that made room). On a
    /// slot other sessions use too, with files chosen there and `[kv] save_after_turn` on,
    /// the slot is saved to `now`'s file here, so that the next session's switch only
    /// restores (`docs/kv.md`, "When the save happens").
    pub async fn after_turn(&self, place: &Place, client: &Client, now: Occupant) {
        if !self.serves(&place.endpoint) {
            return;
        }
        let shared = self.holders().ended(place, client, &now);
        if !shared || !self.save_after_turn || self.choice(&place.endpoint) == Choice::Prefill {
            return;
        }
        if self.save(place, client, &now).await {
            self.holders().saved(place, &now);
            self.counts.saves_after_turn.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether `held`'s file was saved after its turn and is still there (the limits may have
    /// removed it since).
    fn saved_already(&self, held: &Held) -> bool {
        held.saved && self.pair(&held.occupant.session).kv.is_file()
    }

    /// Drops `session`'s file and forgets the slots it holds (its cache there is of an epoch
    /// that is over: saving it would only make a file never used). After a compaction.
    pub fn drop_session(&self, session: &SessionId) {
        self.holders().forget(session);
        self.pair(session).remove();
    }

    /// Gives session `fork` the KV file of `from`, whose log its own starts as a copy of: its
    /// first turn restores it and evaluates only what is new. The file is linked, not copied
    /// (a save never writes a `.bin` in place: it renames a new one over it), and its note is
    /// `from`'s with `fork`'s name, so a file of a later epoch than the fork's cut is refused
    /// at restore like any other that does not match. Whether the fork has one; a failure is
    /// logged, and the fork prefills.
    pub fn copy_for_fork(&self, from: &SessionId, fork: &SessionId) -> bool {
        let source = self.pair(from);
        let Some(mut note) = source.read_note() else {
            return false;
        };
        let target = self.pair(fork);
        note.session = fork.clone();
        note.used_ms = now_ms();
        let made = std::fs::hard_link(&source.kv, &target.temp)
            .or_else(|_| std::fs::copy(&source.kv, &target.temp).map(drop))
            .and_then(|()| std::fs::rename(&target.temp, &target.kv))
            .and_then(|()| target.write_note(&note));
        if let Err(e) = made {
            tracing::warn!(%from, %fork, error = %e, "cannot give a fork its source's KV file; its first turn prefills");
            target.remove();
            return false;
        }
        self.prune();
        true
    }

    /// Saves every slot's holder whose file does not hold it yet (at shutdown), so that their
    /// next turns start warm.
    pub async fn save_all(&self) {
        let held = self.holders().drain();
        for (place, held) in held {
            if self.serves(&place.endpoint) && !self.saved_already(&held) {
                self.save(&place, &held.client, &held.occupant).await;
            }
        }
    }

    /// Saves `held`'s cache from `place` to its file; a failure is logged and leaves no file.
    /// Whether a file was kept.
    async fn save(&self, place: &Place, client: &Client, held: &Occupant) -> bool {
        // Unknown when the session's first turn had not yet written its baseline when it
        // took the slot (it gave the slot back to wait for the owner): such a file is
        // checked by its epoch alone.
        let baseline = held.baseline.clone().unwrap_or_default();
        let pair = self.pair(&held.session);
        let temp = format!("{}{}", name_of(&held.session), files::KV_TEMP_SUFFIX);
        let started = Instant::now();
        let saved = match client.save_slot(place.slot, &temp).await {
            Ok(saved) => {
                self.measured(&place.endpoint, |c| {
                    c.saved(saved.n_saved, elapsed_us(started));
                });
                saved
            }
            Err(e) => {
                self.failed_save(place, &held.session, &pair, &e);
                return false;
            }
        };
        if saved.n_saved == 0 {
            let _ = std::fs::remove_file(&pair.temp);
            return false;
        }
        let note = Note {
            session: held.session.clone(),
            epoch: held.epoch,
            baseline,
            model: self.server.model.clone(),
            n_ctx: self.server.n_ctx,
            tokens: saved.n_saved,
            bytes: saved.n_written,
            used_ms: now_ms(),
        };
        let kept = std::fs::rename(&pair.temp, &pair.kv).and_then(|()| pair.write_note(&note));
        if let Err(e) = kept {
            tracing::warn!(session = %held.session, error = %e, "cannot keep a saved KV file; the session prefills at its next turn");
            self.counts.save_failures.fetch_add(1, Ordering::Relaxed);
            pair.remove();
            return false;
        }
        self.counts.saves.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(session = %held.session, endpoint = %place.endpoint, slot = place.slot, tokens = saved.n_saved, bytes = saved.n_written, "saved a slot's KV cache");
        self.prune();
        true
    }

    fn failed_save(&self, place: &Place, session: &SessionId, pair: &Pair, e: &InferError) {
        pair.remove();
        if self.turn_off_if_unsupported(place, e) {
            return;
        }
        self.counts.save_failures.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%session, endpoint = %place.endpoint, slot = place.slot, error = %e, "cannot save a slot's KV cache; the session prefills at its next turn");
    }

    /// A server started without `--slot-save-path` answers 501: KV files are off for it.
    fn turn_off_if_unsupported(&self, place: &Place, e: &InferError) -> bool {
        if !e.is_not_supported() {
            return false;
        }
        let newly = self
            .off
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(place.endpoint.to_string());
        if newly {
            tracing::warn!(endpoint = %place.endpoint, error = %e, "this model server keeps no slot files (start llama-server with --slot-save-path set to kv.dir); sessions prefill after every switch there");
        }
        true
    }

    /// Restores `now`'s file into `place` when its note matches `now` and this server.
    async fn restore(&self, place: &Place, client: &Client, now: &Occupant) -> Warmth {
        let pair = self.pair(&now.session);
        let Some(mut note) = pair.read_note() else {
            // A session before its first turn (no baseline yet) has nothing to miss.
            if now.baseline.is_some() {
                self.counts.misses.fetch_add(1, Ordering::Relaxed);
            }
            return Warmth::Cold;
        };
        if let Some(why) = self.mismatch(&note, now) {
            tracing::info!(session = %now.session, why, "a KV file that does not match the session now is deleted, not used");
            pair.remove();
            self.counts.misses.fetch_add(1, Ordering::Relaxed);
            return Warmth::Cold;
        }
        let file = format!("{}{KV_SUFFIX}", name_of(&now.session));
        let started = Instant::now();
        match client.restore_slot(place.slot, &file).await {
            Ok(restored) => {
                self.measured(&place.endpoint, |c| {
                    c.restored(restored.n_restored, elapsed_us(started));
                });
                note.used_ms = now_ms();
                let _ = pair.write_note(&note);
                self.counts.restores.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(session = %now.session, endpoint = %place.endpoint, slot = place.slot, tokens = restored.n_restored, "restored a slot's KV cache");
                Warmth::Restored
            }
            Err(e) => {
                if self.turn_off_if_unsupported(place, &e) {
                    return Warmth::Off;
                }
                self.counts.restore_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(session = %now.session, endpoint = %place.endpoint, slot = place.slot, error = %e, "restoring the session's KV file failed; the turn prefills its whole prompt");
                if e.is_refused() {
                    pair.remove();
                }
                Warmth::Failed
            }
        }
    }

    /// Why `note` may not be restored for `now` on this server, if it may not.
    fn mismatch(&self, note: &Note, now: &Occupant) -> Option<String> {
        if note.session != now.session {
            return Some(format!("it was made for session {}", note.session));
        }
        if note.model != self.server.model || note.n_ctx != self.server.n_ctx {
            return Some(format!(
                "it was made by model {:?} with {}-token slots, the server has {:?} with {}",
                note.model, note.n_ctx, self.server.model, self.server.n_ctx
            ));
        }
        let baseline_differs =
            !note.baseline.is_empty() && Some(&note.baseline) != now.baseline.as_ref();
        if note.epoch != now.epoch || baseline_differs {
            return Some(format!(
                "it holds epoch {}, the session is at epoch {} (or its baseline changed)",
                note.epoch, now.epoch
            ));
        }
        None
    }

    /// Adds a measurement to `endpoint`'s costs.
    fn measured(&self, endpoint: &str, add: impl FnOnce(&mut Costs)) {
        add(self.costs().entry(endpoint.to_owned()).or_default());
    }

    /// Removes the least recently used files past the limits.
    fn prune(&self) {
        let all = files::list(&self.dir);
        for pair in files::over_limits(all, self.max_bytes, self.max_files) {
            tracing::debug!(file = %pair.kv.display(), "a KV file removed to stay within [kv] max_bytes and max_files");
            pair.remove();
        }
    }

    /// What `boxctl status` shows: files, bytes, and how switches went.
    pub fn status(&self) -> KvStatus {
        let all = files::list(&self.dir);
        let c = &self.counts;
        let off = self.off.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let costs = self.costs();
        let choices = self
            .endpoints
            .iter()
            .filter(|e| !off.contains(*e))
            .map(|e| costs.get(e).copied().unwrap_or_default().status(e))
            .collect();
        drop(costs);
        KvStatus {
            dir: self.dir.display().to_string(),
            files: all.len() as u64,
            bytes: all.iter().map(|(_, n)| n.bytes).sum(),
            max_bytes: self.max_bytes,
            saves: c.saves.load(Ordering::Relaxed),
            saves_after_turn: c.saves_after_turn.load(Ordering::Relaxed),
            save_failures: c.save_failures.load(Ordering::Relaxed),
            restores: c.restores.load(Ordering::Relaxed),
            misses: c.misses.load(Ordering::Relaxed),
            restore_failures: c.restore_failures.load(Ordering::Relaxed),
            off: off.iter().cloned().collect(),
            choices,
        }
    }
}

/// A shared handle, as the router holds it.
pub type Shared = Arc<SlotFiles>;
