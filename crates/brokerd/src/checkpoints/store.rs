//! The store of checkpoint records: the index and the blobs, opened once by the daemon and
//! shared by every `write_file` call. See the module above for the crash points and bounds.

use super::{Before, CheckpointError, CheckpointSettings, DIR, Record, State, digest};
use bxcore::{DataClass, SessionId, Timestamp};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The index file in the directory.
const INDEX: &str = "index.jsonl";
/// The blobs' directory in the directory.
const BLOBS: &str = "blobs";
/// The mode of the directories: brokerd's user alone.
const DIR_MODE: u32 = 0o700;
/// The mode of the files.
const FILE_MODE: u32 = 0o600;

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
    /// The class of the grant's results.
    pub class: DataClass,
}

/// The records, by sequence number, and what the bounds dropped since the start.
#[derive(Debug, Default)]
struct Inner {
    records: BTreeMap<u64, Record>,
    dropped: u64,
}

/// The checkpoint store.
#[derive(Debug)]
pub struct Checkpoints {
    dir: PathBuf,
    settings: CheckpointSettings,
    inner: Mutex<Inner>,
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
        let mut records = read_index(&dir.join(INDEX))?;
        for record in records.values_mut() {
            if record.state == State::Pending {
                record.state = settle(record);
            }
        }
        records.retain(|_, r| r.state == State::Done);
        let store = Checkpoints {
            dir,
            settings,
            inner: Mutex::new(Inner {
                records,
                dropped: 0,
            }),
        };
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
    fn put_blob(&self, content: &[u8]) -> Result<String, CheckpointError> {
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
        let path = self.dir.join(INDEX);
        let io = |source| CheckpointError::Io {
            what: "append to",
            path: path.clone(),
            source,
        };
        let mut line = serde_json::to_vec(record).map_err(|e| io(e.into()))?;
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(FILE_MODE)
            .open(&path)
            .map_err(io)?;
        file.write_all(&line).map_err(io)?;
        file.sync_data().map_err(io)
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
        let used: HashSet<&str> = inner.records.values().flat_map(Record::blobs).collect();
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
        if seen.insert(record.after_sha256.as_str()) {
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

/// The records of the index at `path`, the last line of each `seq`; a missing index is
/// empty. A last line cut short (a crash during its append) is left out.
fn read_index(path: &Path) -> Result<BTreeMap<u64, Record>, CheckpointError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => {
            return Err(CheckpointError::Io {
                what: "read",
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let lines: Vec<String> = BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(|source| CheckpointError::Io {
            what: "read",
            path: path.to_path_buf(),
            source,
        })?;
    let mut records = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Record>(line) {
            Ok(record) => {
                records.insert(record.seq, record);
            }
            Err(_) if i + 1 == lines.len() => {
                tracing::warn!(path = %path.display(), "the last checkpoint line was cut short by a crash; left out");
            }
            Err(e) => {
                return Err(CheckpointError::Corrupt {
                    path: path.to_path_buf(),
                    line: i + 1,
                    why: e.to_string(),
                });
            }
        }
    }
    Ok(records)
}

/// A new file at `path` (0600), replacing one there.
fn new_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)
}

/// Syncs directory `dir`, so a rename in it is on disk.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests;
