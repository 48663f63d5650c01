//! The overlay way of recording what an `exec` under `rw_paths` changes (`docs/undo.md`, "Runs
//! under rw_paths"): each tree is mounted for the run through an overlay whose upper directory
//! is a stage made here ([`stage`]); the run writes only there, and the tree is left as it was
//! until the run ends. Then ([`Layered::finish`]) the change set is read ([`super::upper`]),
//! every content it writes or removes kept as a blob, the steps written to a journal, synced,
//! the stage removed, and the steps applied to the tree ([`super::apply`]); each file written
//! or removed becomes a record, as in the snapshot way ([`super::runs`]).
//!
//! **Crash points.** A kill -9 during the run, or before the journal is whole, leaves a stage
//! and no journal: the tree was not touched, and the next start removes the stage (a run that
//! did not end changes nothing). A kill -9 after it leaves the journal: the next start applies
//! it again (a step already in place is left, one that something else changed since is not
//! applied) and records what was applied, but a file already recorded for that call. So no
//! file is ever changed without its record, and a run's changes are applied whole or not at
//! all but for what changed meanwhile.
//!
//! **Cost.** Only what the run changed is read and kept; the tree itself is walked once before
//! the run, for owners and sizes only ([`eligible`]).

use super::apply::{Applied, Applier, apply, rel_of};
use super::runs::{Whose, open_tops, record, remove};
use super::tree::{MAX_TREE_DEPTH, names};
use super::upper::{Reader, Step, open_dir, steps};
use super::{CheckpointError, Checkpoints, Record, Recorder};
use bxcore::{DataClass, SessionId};
use rustix::fs::{AtFlags, FileType, statat};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::OwnedMutexGuard;

/// The stages' directory in the store's, when brokerd's user is the sandbox's.
pub const STAGES: &str = "stages";
/// Where the stages live when brokerd runs as root and the sandbox as another user, who must
/// be able to walk to them (bubblewrap resolves a bound descriptor's path as that user):
/// root's, `0711`, each stage its own `0700` directory of the sandbox's user.
pub const ROOT_STAGE_DIR: &str = "/run/bxsandbox-stages";
/// The end of a journal's name, in the store's `running` directory.
pub const JOURNAL_SUFFIX: &str = ".layers.json";
/// The directory of each tree's writes in its stage (the shim's name for it).
pub const UPPER: &str = bxsandbox::overlay::UPPER;
/// The overlay's own directory in a stage.
pub const WORK: &str = bxsandbox::overlay::WORK;
/// The most entries of a tree walked to tell whether the overlay way can take it.
pub const MAX_ELIGIBLE_ENTRIES: usize = 100_000;

/// Numbers this process's stages and journals.
static STAGE_COUNTER: AtomicU64 = AtomicU64::new(0);

/// What is written after a run: whose call it is and the steps of each tree.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Journal {
    pub(super) session: SessionId,
    pub(super) turn: u64,
    pub(super) call: u64,
    pub(super) class: DataClass,
    /// The owner given to what is made.
    pub(super) owner: Option<(u32, u32)>,
    pub(super) trees: Vec<(PathBuf, Vec<Step>)>,
}

/// What finishing a run did.
#[derive(Debug, Default)]
pub struct Finished {
    /// Records made.
    pub records: usize,
    /// Steps not applied: what was there had been changed by something else.
    pub conflicts: Vec<String>,
    /// What the run made that is neither file, directory nor symlink: not applied.
    pub skipped: Vec<PathBuf>,
}

/// A run through overlays: [`Layered::finish`] after it ends. Dropped unfinished (the call's
/// future dropped), its stage is removed and nothing of the run is applied.
#[derive(Debug)]
pub struct Layered {
    inner: Option<Staged>,
}

#[derive(Debug)]
struct Staged {
    store: Arc<Checkpoints>,
    run_dir: PathBuf,
    /// Each tree's upper directory, opened when it was made.
    uppers: Vec<OwnedFd>,
    session: SessionId,
    turn: u64,
    call: u64,
    class: DataClass,
    owner: Option<(u32, u32)>,
    tops: Vec<(PathBuf, OwnedFd)>,
    _one_at_a_time: OwnedMutexGuard<()>,
}

/// Whether every entry of the tree at `top` belongs to `ids` (the overlay can copy up only
/// what the sandbox's namespace maps) and every file is at most `file_bytes` (so what it was
/// can be kept); why not, when not.
pub fn eligible(top: &OwnedFd, ids: (u32, u32), file_bytes: u64) -> Result<(), String> {
    let mut seen = 0usize;
    let mut stack = vec![(
        open_dir(top, Path::new("."), Path::new("")).map_err(|e| e.to_string())?,
        PathBuf::new(),
    )];
    let root = statat(top, ".", AtFlags::empty()).map_err(|e| e.to_string())?;
    if (root.st_uid, root.st_gid) != ids {
        return Err("the tree's top is not the sandbox user's".to_owned());
    }
    while let Some((dir, rel)) = stack.pop() {
        if rel.components().count() > MAX_TREE_DEPTH {
            return Err(format!("{} is too deep", rel.display()));
        }
        for name in names(&dir).map_err(|e| format!("{}: {e}", rel.display()))? {
            seen += 1;
            if seen > MAX_ELIGIBLE_ENTRIES {
                return Err(format!("more than {MAX_ELIGIBLE_ENTRIES} entries"));
            }
            let path = rel.join(&name);
            let stat = statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            if (stat.st_uid, stat.st_gid) != ids {
                return Err(format!("{} is not the sandbox user's", path.display()));
            }
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::Directory => {
                    let child = open_dir(&dir, &name, &path).map_err(|e| e.to_string())?;
                    stack.push((child, path));
                }
                FileType::RegularFile if stat.st_size as u64 > file_bytes => {
                    return Err(format!("{} is larger than max_bytes", path.display()));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Makes a stage under `stages` for each of `tops` (a resolved `rw_paths` entry and its
/// descriptor) before `recorder`'s run, owned by `owner` when given: the run to finish after,
/// and the stages, in order, for the sandbox to bind.
pub fn stage(
    recorder: &Recorder,
    class: DataClass,
    tops: Vec<(PathBuf, OwnedFd)>,
    lock: OwnedMutexGuard<()>,
    stages: &Path,
    owner: Option<(u32, u32)>,
) -> Result<(Layered, Vec<PathBuf>), CheckpointError> {
    let n = STAGE_COUNTER.fetch_add(1, Ordering::Relaxed);
    let run_dir = stages.join(format!("{}-{n}", std::process::id()));
    let mut dirs = Vec::new();
    let mut uppers = Vec::new();
    // All made, and each upper directory held open, before any is given to the sandbox's
    // user (deepest first, the run's own directory last): until then none of it is that
    // user's to swap, and what is read after the run is the directory made here.
    let made = (|| {
        std::fs::DirBuilder::new().mode(0o700).create(&run_dir)?;
        for i in 0..tops.len() {
            let stage = run_dir.join(i.to_string());
            for dir in [&stage, &stage.join(UPPER), &stage.join(WORK)] {
                std::fs::DirBuilder::new().mode(0o700).create(dir)?;
            }
            let upper = stage.join(UPPER);
            uppers.push(open_dir(rustix::fs::CWD, &upper, &upper).map_err(std::io::Error::other)?);
            dirs.push(stage);
        }
        if let Some((uid, gid)) = owner {
            for stage in &dirs {
                for dir in [stage.join(UPPER), stage.join(WORK), stage.clone()] {
                    std::os::unix::fs::lchown(dir, Some(uid), Some(gid))?;
                }
            }
            std::os::unix::fs::lchown(&run_dir, Some(uid), Some(gid))?;
        }
        Ok(())
    })();
    let layered = Layered {
        inner: Some(Staged {
            store: Arc::clone(&recorder.store),
            run_dir: run_dir.clone(),
            uppers,
            session: recorder.session.clone(),
            turn: recorder.turn,
            call: recorder.call,
            class,
            owner,
            tops,
            _one_at_a_time: lock,
        }),
    };
    made.map_err(|source: std::io::Error| CheckpointError::Io {
        what: "make a stage",
        path: run_dir,
        source,
    })?;
    Ok((layered, dirs))
}

impl Layered {
    /// Reads what the run wrote, keeps it, and applies it to the trees (see the module).
    pub fn finish(mut self) -> Result<Finished, CheckpointError> {
        let Some(staged) = self.inner.take() else {
            return Ok(Finished::default());
        };
        let read = staged.read();
        remove_stage(&staged.run_dir);
        let (journal, skipped) = read?;
        let file = staged.store.dir().join(super::runs::RUNNING).join(format!(
            "{}-{}{JOURNAL_SUFFIX}",
            std::process::id(),
            STAGE_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let text = serde_json::to_vec(&journal).map_err(|e| CheckpointError::Io {
            what: "write",
            path: file.clone(),
            source: e.into(),
        })?;
        staged.store.write_synced(&file, &text)?;
        let mut finished = apply_journal(&staged.store, &journal, &staged.tops)?;
        finished.skipped = skipped;
        remove(&file)?;
        Ok(finished)
    }
}

impl Drop for Layered {
    fn drop(&mut self) {
        if let Some(staged) = self.inner.take() {
            tracing::warn!(session = %staged.session, turn = staged.turn, "an exec cut short before it ended: nothing it wrote is applied");
            remove_stage(&staged.run_dir);
        }
    }
}

impl Staged {
    /// The journal of the run's change set, each content kept; what was left out.
    fn read(&self) -> Result<(Journal, Vec<PathBuf>), CheckpointError> {
        let mut keep = |content: &[u8]| self.store.put_blob(content).map(drop);
        let mut reader = Reader {
            file_bytes: self.store.max_bytes(),
            keep: &mut keep,
            seen: 0,
            skipped: Vec::new(),
        };
        let mut trees = Vec::new();
        for ((path, top), upper) in self.tops.iter().zip(&self.uppers) {
            trees.push((
                path.clone(),
                steps(upper.as_fd(), top.as_fd(), &mut reader)?,
            ));
        }
        let skipped = std::mem::take(&mut reader.skipped);
        let journal = Journal {
            session: self.session.clone(),
            turn: self.turn,
            call: self.call,
            class: self.class,
            owner: self.owner,
            trees,
        };
        Ok((journal, skipped))
    }
}

/// Applies `journal`'s steps to `tops` and records each file written or removed, but one
/// already recorded for its call.
fn apply_journal(
    store: &Checkpoints,
    journal: &Journal,
    tops: &[(PathBuf, OwnedFd)],
) -> Result<Finished, CheckpointError> {
    let recorded = store.recorded_for_call(&journal.session, journal.call);
    let blob = |sha: &str| store.blob(sha);
    let how = Applier {
        blob: &blob,
        owner: journal.owner,
        file_bytes: store.max_bytes(),
    };
    let mut made = Vec::new();
    let mut finished = Finished::default();
    for (root, steps) in &journal.trees {
        let Some((_, top)) = tops.iter().find(|(path, _)| path == root) else {
            finished
                .conflicts
                .push(format!("{}: the tree is gone", root.display()));
            continue;
        };
        for step in steps {
            match apply(top, step, &how)? {
                Applied::Done => {
                    let key = (root.clone(), rel_of(step).to_path_buf());
                    if let Some(record) = record_of(journal, root, step)
                        && !recorded.contains(&key)
                    {
                        made.push(record);
                    }
                }
                Applied::Conflict(why) => finished.conflicts.push(why),
            }
        }
    }
    finished.records = made.len();
    store.add_done(made, Vec::new())?;
    Ok(finished)
}

/// The record of a step that writes or removes a file; none for directories and symlinks.
fn record_of(journal: &Journal, root: &Path, step: &Step) -> Option<Record> {
    let (rel, before, after) = match step {
        Step::Write { rel, before, after } => (rel, before, Some(after)),
        Step::Remove {
            rel,
            before: before @ Some(_),
        } => (rel, before, None),
        _ => return None,
    };
    let whose = Whose {
        session: &journal.session,
        turn: journal.turn,
        call: journal.call,
        class: journal.class,
    };
    Some(record(&whose, root, rel.clone(), before.as_ref(), after))
}

/// Applies a journal a crash left (`file`, in `running/`) as [`Layered::finish`] would have
/// (see the module), first removing the temporary files the killed process left; a journal
/// cut short applies nothing. The caller removes the file.
pub(super) fn settle_journal(store: &Checkpoints, file: &Path) {
    let journal: Option<Journal> = std::fs::read(file)
        .ok()
        .and_then(|text| serde_json::from_slice(&text).ok());
    let Some(journal) = journal else {
        return;
    };
    let tops = open_tops(journal.trees.iter().map(|(path, _)| path));
    // The killed process's pid is the first part of the journal's name.
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
    let pid = name
        .as_deref()
        .and_then(|n| n.split('-').next()?.parse::<u32>().ok());
    if let Some(pid) = pid {
        for (root, steps) in &journal.trees {
            if let Some((_, top)) = tops.iter().find(|(path, _)| path == root) {
                super::apply::remove_temps(top, steps, pid);
            }
        }
    }
    match apply_journal(store, &journal, &tops) {
        Ok(done) => {
            tracing::warn!(session = %journal.session, turn = journal.turn, files = done.records, conflicts = ?done.conflicts, "applied the changes of an exec that a crash cut short");
        }
        Err(error) => {
            tracing::error!(%error, session = %journal.session, turn = journal.turn, "the changes of an exec a crash cut short cannot be applied; its files are left as they are");
        }
    }
}

/// Removes every stage a crash left: the store's own, and root's of processes that are gone.
pub(super) fn remove_left_stages(store: &Checkpoints) {
    if let Ok(entries) = std::fs::read_dir(store.dir().join(STAGES)) {
        for entry in entries.flatten() {
            remove_stage(&entry.path());
        }
    }
    remove_stale_root_stages();
}

/// Removes the stages in [`ROOT_STAGE_DIR`] of brokerd processes that are gone (a crash):
/// they hold nothing a tree needs (see the module's crash points).
pub fn remove_stale_root_stages() {
    // Only root's brokerd makes them, and only root may remove them.
    if !nix::unistd::geteuid().is_root() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(ROOT_STAGE_DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let pid = name
            .trim_start_matches("trial-")
            .split('-')
            .next()
            .unwrap_or("");
        let alive = pid
            .parse::<u32>()
            .is_ok_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            remove_stage(&entry.path());
        }
    }
}

/// Removes a stage, logging a failure (it holds nothing the tree needs).
pub fn remove_stage(dir: &Path) {
    // The overlay leaves a directory of mode 0 in each work directory, which brokerd's own
    // user could not list to remove (root can). Only then is it made listable: brokerd's
    // stages are in its private state dir, where no other user can put a symlink for the
    // chmod to follow (under `ROOT_STAGE_DIR` the sandbox's user could).
    if !nix::unistd::geteuid().is_root()
        && let Ok(stages) = std::fs::read_dir(dir)
    {
        for stage in stages.flatten() {
            if let Ok(inner) = std::fs::read_dir(stage.path().join(WORK)) {
                for left in inner.flatten() {
                    let open = std::os::unix::fs::PermissionsExt::from_mode(0o700);
                    let _ = std::fs::set_permissions(left.path(), open);
                }
            }
        }
    }
    if let Err(error) = std::fs::remove_dir_all(dir)
        && error.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(%error, dir = %dir.display(), "cannot remove an exec's stage");
    }
}
