//! What an `exec` under `rw_paths` changed: each tree it may write is taken before the run (every
//! file's content kept as a blob) and again after, and each file that differs becomes a record,
//! like a `write_file`'s: made, changed (content or permission bits) or removed. This is the
//! snapshot way; the overlay way (the run writes into an upper directory, applied after) is not
//! built: bubblewrap's `--overlay` mounts by a path it resolves again, which would undo the
//! pinning of `rw_paths` (`docs/undo.md`, "Runs under rw_paths", says how it can be built).
//!
//! **Crash points.** The trees taken before the run are written to `running/<n>.json`, synced,
//! before the program starts, and the file is removed once the records are in the index. A
//! kill -9 in between leaves it: the next start takes the trees again, records what differs
//! (but a file already recorded for that call) and removes it. So every change the program
//! made has its record, whenever brokerd died.
//!
//! **Cost.** Taking a tree before a run writes each file's blob (synced) unless it is there:
//! the blobs of each tree as the last run left it are kept (in memory only: after a restart
//! the first run writes them again), so a run whose tree did not change since writes none.
//!
//! **One at a time.** While a run is watched, no other run nor `write_file` changes files
//! ([`Checkpoints::tree_lock`]), so what differs after it is what it did.

use super::tree::{self, Entry, Limits, Tree};
use super::{Before, CheckpointError, Checkpoints, Record, Recorder, State};
use bxcore::{DataClass, SessionId, Timestamp};
use rustix::fs::{Mode, OFlags};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::OwnedMutexGuard;

/// The directory of the runs being watched, in the store's.
pub const RUNNING: &str = "running";

/// Numbers the files of this process's watched runs.
static RUN_COUNTER: AtomicU64 = AtomicU64::new(0);

/// What is written before a run: whose call it is and its trees as they were.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    session: SessionId,
    turn: u64,
    call: u64,
    class: DataClass,
    trees: Vec<(PathBuf, Tree)>,
}

/// A run being watched: [`Watch::finish`] after it ends. Dropped unfinished (the call's future
/// dropped), it finishes as it drops, so no change waits for the next start to be recorded.
#[derive(Debug)]
pub struct Watch {
    inner: Option<Watched>,
}

/// What a watch holds.
#[derive(Debug)]
struct Watched {
    store: Arc<Checkpoints>,
    file: PathBuf,
    manifest: Manifest,
    tops: Vec<OwnedFd>,
    _one_at_a_time: OwnedMutexGuard<()>,
}

/// Takes the trees `tops` (each a resolved `rw_paths` entry and a descriptor of it) before
/// `recorder`'s run, keeping every file's content: the watch to finish after the run. Fails
/// when a tree cannot be kept (past `max_bytes` or [`tree::MAX_TREE_FILES`]): the run must not
/// start then.
pub fn watch(
    recorder: &Recorder,
    class: DataClass,
    tops: Vec<(PathBuf, OwnedFd)>,
    lock: OwnedMutexGuard<()>,
) -> Result<Watch, CheckpointError> {
    let store = Arc::clone(&recorder.store);
    let limits = Limits {
        file_bytes: store.max_bytes(),
        total_bytes: store.max_bytes(),
    };
    let mut trees = Vec::new();
    let mut fds = Vec::new();
    for (path, fd) in tops {
        let mut keep = |_: &Path, content: &[u8], _: &Entry| store.put_blob(content).map(drop);
        trees.push((
            path.clone(),
            tree::scan(fd.as_fd(), &path, limits, &mut keep)?,
        ));
        fds.push(fd);
    }
    let manifest = Manifest {
        session: recorder.session.clone(),
        turn: recorder.turn,
        call: recorder.call,
        class,
        trees,
    };
    let n = RUN_COUNTER.fetch_add(1, Ordering::Relaxed);
    let file = store
        .dir()
        .join(RUNNING)
        .join(format!("{}-{n}.json", std::process::id()));
    let text = serde_json::to_vec(&manifest).map_err(|e| CheckpointError::Io {
        what: "write",
        path: file.clone(),
        source: e.into(),
    })?;
    store.write_synced(&file, &text)?;
    Ok(Watch {
        inner: Some(Watched {
            store,
            file,
            manifest,
            tops: fds,
            _one_at_a_time: lock,
        }),
    })
}

impl Manifest {
    fn whose(&self) -> Whose<'_> {
        Whose {
            session: &self.session,
            turn: self.turn,
            call: self.call,
            class: self.class,
        }
    }
}

impl Watch {
    /// Takes the trees again and records each file that differs; how many.
    pub fn finish(mut self) -> Result<usize, CheckpointError> {
        self.inner.take().map_or(Ok(0), Watched::finish)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(watched) = self.inner.take()
            && let Err(error) = watched.finish()
        {
            tracing::error!(%error, "cannot record what a cut-short exec changed; brokerd's next start tries again");
        }
    }
}

impl Watched {
    fn finish(self) -> Result<usize, CheckpointError> {
        let tops: Vec<(PathBuf, OwnedFd)> = self
            .manifest
            .trees
            .iter()
            .map(|(path, _)| path.clone())
            .zip(self.tops)
            .collect();
        let made = record_changes(&self.store, &self.manifest, &tops)?;
        remove(&self.file)?;
        Ok(made)
    }
}

/// Records what the run of a manifest a crash left (`file`, in `running/`) changed, as
/// [`Watch::finish`] would have (see the module); a manifest cut short (the run had not
/// started) records nothing. The caller removes the file.
pub(super) fn settle_manifest(store: &Checkpoints, file: &Path) {
    let manifest: Option<Manifest> = std::fs::read(file)
        .ok()
        .and_then(|text| serde_json::from_slice(&text).ok());
    let Some(manifest) = manifest else {
        return;
    };
    let tops = open_tops(manifest.trees.iter().map(|(path, _)| path));
    // A tree the run made unreadable (too many files, too deep) must not keep brokerd
    // from starting: what it changed stays unrecorded, and says so.
    match record_changes(store, &manifest, &tops) {
        Ok(made) => {
            tracing::warn!(session = %manifest.session, turn = manifest.turn, files = made, "recorded the changes of an exec that a crash cut short");
        }
        Err(error) => {
            tracing::error!(%error, session = %manifest.session, turn = manifest.turn, "what an exec changed cannot be recorded; an undo of its turn leaves those files as they are");
        }
    }
}

/// A descriptor of each tree at `paths` that is still there (one gone is logged and left out).
pub(super) fn open_tops<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> Vec<(PathBuf, OwnedFd)> {
    paths
        .filter_map(|path| open_top(path).map(|fd| (path.clone(), fd)))
        .collect()
}

/// Records what differs in `tops` from `manifest`'s trees, but a file already recorded for
/// its call; how many records.
fn record_changes(
    store: &Checkpoints,
    manifest: &Manifest,
    tops: &[(PathBuf, OwnedFd)],
) -> Result<usize, CheckpointError> {
    let recorded = store.recorded_for_call(&manifest.session, manifest.call);
    let limits = Limits {
        file_bytes: store.max_bytes(),
        total_bytes: u64::MAX,
    };
    let mut made = Vec::new();
    let mut trees = Vec::new();
    for (path, fd) in tops {
        let Some((_, before)) = manifest.trees.iter().find(|(p, _)| p == path) else {
            continue;
        };
        let mut keep = |rel: &Path, content: &[u8], entry: &Entry| {
            if before.get(rel) != Some(entry) {
                store.put_blob(content)?;
            }
            Ok(())
        };
        let after = tree::scan(fd.as_fd(), path, limits, &mut keep)?;
        trees.push((
            path.clone(),
            after.values().map(|e| e.sha256.clone()).collect(),
        ));
        for (rel, before, after) in differences(before, &after) {
            if recorded.contains(&(path.clone(), rel.clone())) {
                continue;
            }
            made.push(record(&manifest.whose(), path, rel, before, after));
        }
    }
    let count = made.len();
    store.add_done(made, trees)?;
    Ok(count)
}

/// Each file of `before` or `after` that differs: its path, what was there and what is now.
fn differences<'a>(
    before: &'a Tree,
    after: &'a Tree,
) -> Vec<(PathBuf, Option<&'a Entry>, Option<&'a Entry>)> {
    let made_or_changed = after
        .iter()
        .filter(|(rel, now)| before.get(*rel) != Some(*now))
        .map(|(rel, now)| (rel.clone(), before.get(rel), Some(now)));
    let removed = before
        .iter()
        .filter(|(rel, _)| !after.contains_key(*rel))
        .map(|(rel, was)| (rel.clone(), Some(was), None));
    made_or_changed.chain(removed).collect()
}

/// Whose call an exec's change is: what its records carry.
pub(super) struct Whose<'a> {
    pub(super) session: &'a SessionId,
    pub(super) turn: u64,
    pub(super) call: u64,
    pub(super) class: DataClass,
}

/// The record of one file an exec's run changed (its `seq` given when added), by either way.
pub(super) fn record(
    whose: &Whose<'_>,
    root: &Path,
    rel: PathBuf,
    before: Option<&Entry>,
    after: Option<&Entry>,
) -> Record {
    Record {
        seq: 0,
        state: State::Done,
        time: Timestamp::now(),
        session: whose.session.clone(),
        turn: whose.turn,
        call: whose.call,
        root: root.to_path_buf(),
        rel,
        before: before.map(|b| Before {
            sha256: b.sha256.clone(),
            bytes: b.bytes,
            mode: b.mode,
        }),
        after_sha256: after.map(|a| a.sha256.clone()).unwrap_or_default(),
        after_bytes: after.map_or(0, |a| a.bytes),
        removed: after.is_none(),
        temp: None,
        class: whose.class,
    }
}

/// A descriptor of the tree at `path`, opened following no symlink at its end; none (logged)
/// when it is gone.
pub(super) fn open_top(path: &Path) -> Option<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => Some(fd),
        Err(error) => {
            tracing::error!(%error, path = %path.display(), "an exec's rw path is gone; its changes cannot be recorded");
            None
        }
    }
}

/// Removes the file of a finished run (a manifest, a journal); one already gone is fine.
pub(super) fn remove(file: &Path) -> Result<(), CheckpointError> {
    match std::fs::remove_file(file) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CheckpointError::Io {
            what: "remove",
            path: file.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}
