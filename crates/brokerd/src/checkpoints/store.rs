//! The store of checkpoint records: the index and the blobs, opened once by the daemon and
//! shared by every `write_file` call. See the module above for the crash points and bounds.

use super::files::{FILE_MODE, new_file, read_index, sync_dir};
use super::runs::RUNNING;
use super::{Before, CheckpointError, CheckpointSettings, DIR, Record, State, digest};
use bxcore::{DataClass, SessionId, Timestamp};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The index file in the directory.
const INDEX: &str = "index.jsonl";
/// The blobs' directory in the directory.
const BLOBS: &str = "blobs";
/// The mode of the directories: brokerd's user alone.
const DIR_MODE: u32 = 0o700;

/// A write recorded as pending: [`Checkpoints::done`] once the file is in place,
/// [`Checkpoints::abandon`] when it was not put there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a pending record is made done or abandoned"]
pub struct Pending {
    seq: u64,
}

/// One write to record, before it is made.
#[derive(Debug, Clone)]
pub struct NewWrite<'a> {
    /// The session whose call writes.
    pub session: &'a SessionId,
    /// Its turn.
    pub turn: u64,
    /// The call's number.
    pub call: u64,
    /// The grant's root (canonical).
    pub root: &'a Path,
    /// The file beneath it.
    pub rel: &'a Path,
    /// What is there now, and its permission bits; none: no file.
    pub before: Option<(&'a [u8], u32)>,
    /// What the write writes.
    pub after: &'a [u8],
    /// The temporary file beside the target that the write fills first: removed by the
    /// settling of a pending record after a crash.
    pub temp: Option<&'a str>,
    /// The class of the grant's results.
    pub class: DataClass,
}

/// The records, by sequence number, and what the bounds dropped since the start.
#[derive(Debug, Default)]
struct Inner {
    records: BTreeMap<u64, Record>,
    dropped: u64,
    /// Per `rw_paths` tree, the digests of its files when an exec's run last ended: their
    /// blobs are kept, so the next run's tree is taken without writing them again.
    trees: BTreeMap<PathBuf, HashSet<String>>,
}

/// The checkpoint store.
#[derive(Debug)]
pub struct Checkpoints {
    dir: PathBuf,
    settings: CheckpointSettings,
    inner: Mutex<Inner>,
    tree_lock: Arc<tokio::sync::Mutex<()>>,
    /// Which way each exec under `rw_paths` was recorded.
    pub ways: super::ways::ExecWays,
}

impl Checkpoints {
    /// Opens (or makes) the store under `state_dir`: pending records are settled against the
    /// files (see the module), the bounds applied and the index written anew.
    pub fn open(
        state_dir: &Path,
        settings: CheckpointSettings,
    ) -> Result<Checkpoints, CheckpointError> {
        let dir = state_dir.join(DIR);
        let io = |what, path: &Path| {
            let path = path.to_path_buf();
            move |source| CheckpointError::Io { what, path, source }
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir.join(BLOBS))
            .map_err(io("make", &dir))?;
        for sub in [RUNNING, super::layers::STAGES] {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(dir.join(sub))
                .map_err(io("make", &dir))?;
        }
        let mut records = read_index(&dir.join(INDEX))?;
        for record in records.values_mut() {
            if record.state == State::Pending {
                record.state = settle(record);
                super::files::remove_temp(record);
                record.temp = None;
            }
        }
        records.retain(|_, r| r.state == State::Done);
        let store = Checkpoints {
            dir,
            settings,
            inner: Mutex::new(Inner {
                records,
                dropped: 0,
                trees: BTreeMap::new(),
            }),
            tree_lock: Arc::default(),
            ways: Default::default(),
        };
        super::settle::settle(&store)?;
        let mut inner = store.lock();
        store.apply_bounds(&mut inner);
        store.rewrite_index(&inner)?;
        store.remove_unused_blobs(&inner);
        drop(inner);
        Ok(store)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether writes are recorded.
    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// `[checkpoints] max_bytes`.
    pub fn max_bytes(&self) -> u64 {
        self.settings.max_bytes
    }

    /// The store's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The lock a change of files recorded here holds (a `write_file`, or an `exec` under
    /// `rw_paths` for its whole run), so that what an exec's run changed is told apart from
    /// what others did meanwhile.
    pub fn tree_lock(&self) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(&self.tree_lock)
    }

    /// Adds `made`, changes already made (an exec's), as done records in one append, each
    /// given the next `seq`, and keeps the blobs of `trees` (each tree as the run left it);
    /// the bounds are applied, and the blobs neither a record nor a tree holds removed.
    pub(super) fn add_done(
        &self,
        made: Vec<Record>,
        trees: Vec<(PathBuf, HashSet<String>)>,
    ) -> Result<(), CheckpointError> {
        let mut inner = self.lock();
        inner.trees.extend(trees);
        if made.is_empty() {
            self.remove_unused_blobs(&inner);
            return Ok(());
        }
        let first = inner.records.keys().next_back().map_or(1, |last| last + 1);
        let mut lines = Vec::new();
        let mut numbered = Vec::new();
        for (seq, mut record) in (first..).zip(made) {
            record.seq = seq;
            serde_json::to_writer(&mut lines, &record).map_err(|e| self.index_error(e.into()))?;
            lines.push(b'\n');
            numbered.push(record);
        }
        self.append_lines(&lines)?;
        for record in numbered {
            inner.records.insert(record.seq, record);
        }
        if self.apply_bounds(&mut inner) {
            self.rewrite_index(&inner)?;
        }
        self.remove_unused_blobs(&inner);
        Ok(())
    }

    /// The files recorded for `session`'s call `call`, as (root, path beneath it).
    pub(super) fn recorded_for_call(
        &self,
        session: &SessionId,
        call: u64,
    ) -> HashSet<(PathBuf, PathBuf)> {
        let inner = self.lock();
        inner
            .records
            .values()
            .filter(|r| &r.session == session && r.call == call)
            .map(|r| (r.root.clone(), r.rel.clone()))
            .collect()
    }

    /// Writes `bytes` to a new private file `path`, synced with its directory.
    pub(super) fn write_synced(&self, path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
        let io = |source| CheckpointError::Io {
            what: "write",
            path: path.to_path_buf(),
            source,
        };
        let mut file = new_file(path).map_err(io)?;
        file.write_all(bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
        sync_dir(path.parent().unwrap_or(&self.dir)).map_err(io)
    }

    /// Records `write` as pending: its blobs and its line are on disk when this returns.
    pub fn begin(&self, write: &NewWrite<'_>) -> Result<Pending, CheckpointError> {
        let mut inner = self.lock();
        let before = match write.before {
            Some((content, mode)) => Some(Before {
                sha256: self.put_blob(content)?,
                bytes: content.len() as u64,
                mode,
            }),
            None => None,
        };
        let after_sha256 = self.put_blob(write.after)?;
        let seq = inner.records.keys().next_back().map_or(1, |last| last + 1);
        let record = Record {
            seq,
            state: State::Pending,
            time: Timestamp::now(),
            session: write.session.clone(),
            turn: write.turn,
            call: write.call,
            root: write.root.to_path_buf(),
            rel: write.rel.to_path_buf(),
            before,
            after_sha256,
            after_bytes: write.after.len() as u64,
            removed: false,
            temp: write.temp.map(str::to_owned),
            class: write.class,
        };
        self.append(&record)?;
        inner.records.insert(seq, record);
        Ok(Pending { seq })
    }

    /// The write of `pending` is in place; the bounds are applied.
    pub fn done(&self, pending: Pending) -> Result<(), CheckpointError> {
        self.set_state(pending.seq, State::Done)?;
        let mut inner = self.lock();
        if self.apply_bounds(&mut inner) {
            self.rewrite_index(&inner)?;
            self.remove_unused_blobs(&inner);
        }
        Ok(())
    }

    /// The write of `pending` was not made.
    pub fn abandon(&self, pending: Pending) -> Result<(), CheckpointError> {
        self.set_state(pending.seq, State::Dropped)
    }

    /// Sets the state of record `seq` (a line on disk, then in memory); `Undone` and
    /// `Dropped` records are forgotten.
    pub fn set_state(&self, seq: u64, state: State) -> Result<(), CheckpointError> {
        let mut inner = self.lock();
        let Some(record) = inner.records.get(&seq) else {
            return Ok(());
        };
        let mut changed = record.clone();
        changed.state = state;
        if state != State::Pending {
            changed.temp = None;
        }
        self.append(&changed)?;
        if matches!(state, State::Done | State::Pending) {
            inner.records.insert(seq, changed);
        } else {
            inner.records.remove(&seq);
        }
        Ok(())
    }

    /// The records of `session` whose files are in place, oldest first.
    pub fn records(&self, session: &SessionId) -> Vec<Record> {
        let inner = self.lock();
        inner
            .records
            .values()
            .filter(|r| &r.session == session && r.state == State::Done)
            .cloned()
            .collect()
    }

    /// What is kept, as `boxctl status` shows it: records, sessions, bytes against
    /// `max_bytes`, and the records the bounds dropped since brokerd started.
    pub fn status_line(&self) -> String {
        if !self.settings.enabled {
            return "off".to_owned();
        }
        let inner = self.lock();
        let records: Vec<&Record> = inner.records.values().collect();
        let sessions: HashSet<&SessionId> = records.iter().map(|r| &r.session).collect();
        let mut line = format!(
            "{} write(s) of {} session(s) kept, {} of {} bytes",
            records.len(),
            sessions.len(),
            blob_bytes(&records),
            self.settings.max_bytes
        );
        if inner.dropped > 0 {
            line.push_str(&format!(
                "; {} dropped, oldest first, past [checkpoints] max_bytes or keep_turns",
                inner.dropped
            ));
        }
        line.push_str(&self.ways.describe());
        line
    }

    /// How many records the bounds dropped since brokerd started.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    /// The content of blob `sha256`; `None` when it is gone.
    pub fn blob(&self, sha256: &str) -> Option<Vec<u8>> {
        if !sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        std::fs::read(self.dir.join(BLOBS).join(sha256)).ok()
    }

    /// Keeps `content` as a blob (once per digest), synced; its digest.
    pub(super) fn put_blob(&self, content: &[u8]) -> Result<String, CheckpointError> {
        let sha = digest(content);
        let path = self.dir.join(BLOBS).join(&sha);
        if path.exists() {
            return Ok(sha);
        }
        let partial = self.dir.join(BLOBS).join(format!(".{sha}.tmp"));
        let io = |source| CheckpointError::Io {
            what: "write",
            path: path.clone(),
            source,
        };
        let mut file = new_file(&partial).map_err(io)?;
        file.write_all(content).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&partial, &path).map_err(io)?;
        sync_dir(&self.dir.join(BLOBS)).map_err(io)?;
        Ok(sha)
    }

    /// Appends `record` to the index, synced.
    fn append(&self, record: &Record) -> Result<(), CheckpointError> {
        let mut line = serde_json::to_vec(record).map_err(|e| self.index_error(e.into()))?;
        line.push(b'\n');
        self.append_lines(&line)
    }

    /// Appends `lines` to the index in one write, synced.
    fn append_lines(&self, lines: &[u8]) -> Result<(), CheckpointError> {
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(FILE_MODE)
            .open(self.dir.join(INDEX))
            .map_err(|e| self.index_error(e))?;
        file.write_all(lines).map_err(|e| self.index_error(e))?;
        file.sync_data().map_err(|e| self.index_error(e))
    }

    /// An error appending to the index.
    fn index_error(&self, source: std::io::Error) -> CheckpointError {
        CheckpointError::Io {
            what: "append to",
            path: self.dir.join(INDEX),
            source,
        }
    }

    /// Drops the oldest records past the bounds; whether any went.
    fn apply_bounds(&self, inner: &mut Inner) -> bool {
        let mut gone = BTreeSet::new();
        // Per session, the turns past `keep_turns`, oldest first.
        let mut turns: BTreeMap<&SessionId, BTreeSet<u64>> = BTreeMap::new();
        for record in inner.records.values() {
            turns
                .entry(&record.session)
                .or_default()
                .insert(record.turn);
        }
        let keep = usize::try_from(self.settings.keep_turns).unwrap_or(usize::MAX);
        for (session, turns) in &turns {
            let over = turns.len().saturating_sub(keep);
            for turn in turns.iter().take(over) {
                gone.extend(
                    inner
                        .records
                        .values()
                        .filter(|r| &r.session == *session && r.turn == *turn)
                        .map(|r| r.seq),
                );
            }
        }
        // Then the oldest, until the distinct blobs fit `max_bytes`.
        let mut left: Vec<&Record> = inner
            .records
            .values()
            .filter(|r| !gone.contains(&r.seq))
            .collect();
        while blob_bytes(&left) > self.settings.max_bytes && !left.is_empty() {
            gone.insert(left.remove(0).seq);
        }
        for seq in &gone {
            inner.records.remove(seq);
        }
        inner.dropped += gone.len() as u64;
        if !gone.is_empty() {
            tracing::info!(
                records = gone.len(),
                "the oldest checkpoints went, past [checkpoints] max_bytes or keep_turns"
            );
        }
        !gone.is_empty()
    }

    /// Writes the index anew with the live records only (replaced whole).
    fn rewrite_index(&self, inner: &Inner) -> Result<(), CheckpointError> {
        let path = self.dir.join(INDEX);
        let partial = self.dir.join(format!(".{INDEX}.tmp"));
        let io = |source| CheckpointError::Io {
            what: "rewrite",
            path: path.clone(),
            source,
        };
        let mut text = Vec::new();
        for record in inner.records.values() {
            serde_json::to_writer(&mut text, record).map_err(|e| io(e.into()))?;
            text.push(b'\n');
        }
        let mut file = new_file(&partial).map_err(io)?;
        file.write_all(&text).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&partial, &path).map_err(io)?;
        sync_dir(&self.dir).map_err(io)
    }

    /// Removes the blobs no record holds (a failure is logged: it costs space only).
    fn remove_unused_blobs(&self, inner: &Inner) {
        let mut used: HashSet<&str> = inner.records.values().flat_map(Record::blobs).collect();
        used.extend(inner.trees.values().flatten().map(String::as_str));
        let Ok(entries) = std::fs::read_dir(self.dir.join(BLOBS)) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !used.contains(name.to_string_lossy().as_ref())
                && let Err(error) = std::fs::remove_file(entry.path())
            {
                tracing::warn!(%error, blob = ?name, "cannot remove a checkpoint blob");
            }
        }
    }
}

/// The bytes of the distinct blobs `records` hold.
fn blob_bytes(records: &[&Record]) -> u64 {
    let mut seen = HashSet::new();
    let mut bytes = 0;
    for record in records {
        if let Some(before) = &record.before
            && seen.insert(before.sha256.as_str())
        {
            bytes += before.bytes;
        }
        if !record.removed && seen.insert(record.after_sha256.as_str()) {
            bytes += record.after_bytes;
        }
    }
    bytes
}

/// What a record left pending by a crash is: done when its file holds what it wrote, else
/// dropped (the write never reached the file).
fn settle(record: &Record) -> State {
    match std::fs::read(record.path()) {
        Ok(content) if digest(&content) == record.after_sha256 => State::Done,
        _ => State::Dropped,
    }
}

#[cfg(test)]
mod tests;
