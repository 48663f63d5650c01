//! The work of `write_file`: every step relative to one fd of the target's directory, opened
//! beneath the root ([`super::beneath`]), never by path.
//!
//! The content goes to a temporary file created in that directory with `O_CREAT | O_EXCL |
//! O_NOFOLLOW`, which is synced and then renamed onto the target name (`renameat`, or
//! `renameat2(RENAME_NOREPLACE)` without `overwrite`), in the same directory fd, which is synced
//! last. A directory swapped for a symlink after the check makes the open of the directory fail
//! (`PathNotAllowed`); once it is open, whatever is renamed in the tree, the file lands in that
//! directory, which is under the root.
//!
//! **Permissions.** A new file gets `0o666` less the umask, as `open` gives it. An overwritten
//! file keeps the old one's permission bits, but never setuid, setgid or sticky
//! ([`KEPT_MODE_BITS`]): the temporary file is created with the old bits (less the umask, so it
//! is never more open than the old file while it fills) and set to them exactly once written.
//!
//! **Links.** The new file never has a second name: the temporary name is renamed, not linked
//! (the hard-link fallback, for a file system without `RENAME_NOREPLACE`, removes the temporary
//! name right after), so what brokerd writes is never refused by `read_file`'s hard-link rule
//! once the call has returned. Overwriting a target with other hard links replaces the name
//! only: its other names keep the old content.

use super::beneath::{self, Root};
use super::io_failed;
use super::paths::{self, Resolved};
use crate::checkpoints::{CheckpointError, NewWrite, Pending, Recorder};
use crate::tool::{ToolError, ToolOutput};
use bxcore::DataClass;
use rustix::fs::{
    AtFlags, FileType, Mode, OFlags, RenameFlags, fchmod, linkat, openat, renameat, renameat_with,
    statat, unlinkat,
};
use rustix::io::Errno;
use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The permission bits a written file may keep from the one it replaces: read, write and
/// execute for owner, group and others; never setuid (`0o4000`), setgid (`0o2000`) or sticky
/// (`0o1000`).
pub(crate) const KEPT_MODE_BITS: u32 = 0o777;

/// The permission bits of a new file, before the umask.
const NEW_FILE_MODE: u32 = 0o666;

/// Numbers the temporary files of this process's writes.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temporary name in a directory, removed when dropped unless it was renamed away.
struct TempName<'a> {
    dir: BorrowedFd<'a>,
    name: String,
    keep: bool,
}

impl Drop for TempName<'_> {
    fn drop(&mut self) {
        if !self.keep {
            let _ = unlinkat(self.dir, self.name.as_str(), AtFlags::empty());
        }
    }
}

/// What a write is to: the path as the model gave it, the grant's roots, and where the write is
/// recorded for undo (with the class of the grant's results), if anywhere.
pub(crate) struct Target<'a> {
    pub(crate) arg: &'a Path,
    pub(crate) roots: &'a [PathBuf],
    pub(crate) record: Option<(&'a Recorder, DataClass)>,
}

/// `write_file`'s work.
pub(crate) fn write_file(
    target: &Target<'_>,
    content: &str,
    overwrite: bool,
) -> Result<ToolOutput, ToolError> {
    let arg = target.arg;
    let resolved = paths::resolve_allowed(arg, target.roots)?;
    let failed = |e: Errno| io_failed("write", arg, &e.into());
    let exists_error = || {
        ToolError::Failed(format!(
            "{} already exists; pass \"overwrite\": true to replace it",
            arg.display()
        ))
    };
    if resolved.missing > 1 {
        return Err(ToolError::Failed(format!(
            "cannot write {}: its directory does not exist",
            arg.display()
        )));
    }
    let not_a_file = || {
        ToolError::Failed(format!(
            "{} exists and is not a regular file",
            arg.display()
        ))
    };
    let Resolved { root, rel, missing } = &resolved;
    // An empty `rel` is the root itself: a directory.
    let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Err(not_a_file());
    };
    let open_failed = |e| beneath::open_failed("write", arg, e);
    let root = Root::open(root).map_err(open_failed)?;
    let dir = root
        .open_at(parent, OFlags::RDONLY | OFlags::DIRECTORY)
        .map_err(open_failed)?;
    let old_mode = if *missing == 0 {
        let stat = statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(failed)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            // The check followed every symlink, so one here was put in since.
            FileType::Symlink => return Err(open_failed(Errno::LOOP)),
            _ => return Err(not_a_file()),
        }
        if !overwrite {
            return Err(exists_error());
        }
        Some(stat.st_mode & KEPT_MODE_BITS)
    } else {
        None
    };
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp_name = format!(".brokerd-write-{}-{n}.tmp", std::process::id());
    // Recorded before the temporary file is made, with its name (a start after a crash removes
    // it), and settled after the rename: see `checkpoints` for the crash points.
    let pending = match target.record {
        Some((recorder, class)) => {
            let before = match old_mode {
                Some(mode) => Some((read_old(&dir, name, arg, recorder)?, mode)),
                None => None,
            };
            let write = (before, content, temp_name.as_str());
            Some(record_write(recorder, class, &resolved, write, arg)?)
        }
        None => None,
    };
    let abandon = |error: ToolError| {
        if let (Some(pending), Some((recorder, _))) = (pending, target.record) {
            settle(recorder.store.abandon(pending), arg);
        }
        error
    };
    let mut temp = TempName {
        dir: dir.as_fd(),
        name: temp_name,
        keep: false,
    };
    write_temp(&temp, content, old_mode, arg).map_err(abandon)?;
    put_in_place(&mut temp, name, overwrite)
        .map_err(failed)
        .and_then(|placed| if placed { Ok(()) } else { Err(exists_error()) })
        .map_err(abandon)?;
    drop(temp);
    rustix::fs::fsync(&dir).map_err(failed)?;
    if let (Some(pending), Some((recorder, _))) = (pending, target.record) {
        settle(recorder.store.done(pending), arg);
    }
    Ok(ToolOutput {
        content: format!(
            "wrote {} bytes to {}",
            content.len(),
            resolved.path().display()
        ),
        truncated: false,
    })
}

/// Fills the temporary file `temp` with `content` (created with `old_mode` less the umask, or a
/// new file's mode, then set to `old_mode` exactly), synced.
fn write_temp(
    temp: &TempName<'_>,
    content: &str,
    old_mode: Option<u32>,
    arg: &Path,
) -> Result<(), ToolError> {
    let failed = |e: Errno| io_failed("write", arg, &e.into());
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mode = Mode::from_raw_mode(old_mode.unwrap_or(NEW_FILE_MODE));
    let file: OwnedFd = openat(temp.dir, temp.name.as_str(), flags, mode).map_err(failed)?;
    let mut file = File::from(file);
    file.write_all(content.as_bytes())
        .map_err(|e| io_failed("write", arg, &e))?;
    if let Some(bits) = old_mode {
        fchmod(&file, Mode::from_raw_mode(bits)).map_err(failed)?;
    }
    file.sync_all().map_err(|e| io_failed("write", arg, &e))
}

/// The content of the file `name` in `dir`, which the write replaces, for its checkpoint: read
/// through the directory's fd, following no symlink, at most the store's `max_bytes` (a larger
/// file is not written: its undo could not be kept).
fn read_old(
    dir: &OwnedFd,
    name: &OsStr,
    arg: &Path,
    recorder: &Recorder,
) -> Result<Vec<u8>, ToolError> {
    use std::io::Read;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd =
        openat(dir, name, flags, Mode::empty()).map_err(|e| io_failed("write", arg, &e.into()))?;
    let cap = recorder.store.max_bytes();
    let mut old = Vec::new();
    File::from(fd)
        .take(cap.saturating_add(1))
        .read_to_end(&mut old)
        .map_err(|e| io_failed("write", arg, &e))?;
    if old.len() as u64 > cap {
        return Err(ToolError::Failed(format!(
            "not written: {} is larger than [checkpoints] max_bytes ({cap} bytes), so what it \
             holds now could not be kept for an undo",
            arg.display()
        )));
    }
    Ok(old)
}

/// Records the write of `content` over `before` through the temporary file `temp` as pending.
/// A failure refuses the write: the owner counts on undoing what a turn changed.
fn record_write(
    recorder: &Recorder,
    class: DataClass,
    resolved: &Resolved,
    (before, content, temp): (Option<(Vec<u8>, u32)>, &str, &str),
    arg: &Path,
) -> Result<Pending, ToolError> {
    let write = NewWrite {
        session: &recorder.session,
        turn: recorder.turn,
        call: recorder.call,
        root: &resolved.root,
        rel: &resolved.rel,
        before: before.as_ref().map(|(old, mode)| (old.as_slice(), *mode)),
        after: content.as_bytes(),
        temp: Some(temp),
        class,
    };
    recorder.store.begin(&write).map_err(|e| {
        tracing::error!(error = %e, "cannot record a write's checkpoint; the write is refused");
        ToolError::Failed(format!(
            "not written: {} could not be recorded for an undo (brokerd's log says why)",
            arg.display()
        ))
    })
}

/// Logs a checkpoint that could not be settled: the next start settles it from the file.
fn settle(result: Result<(), CheckpointError>, arg: &Path) {
    if let Err(error) = result {
        tracing::error!(%error, path = %arg.display(), "cannot settle a write's checkpoint; the next start of brokerd settles it");
    }
}

/// Moves the temporary file onto `name` in its directory: over what is there with `overwrite`,
/// otherwise only if the name is free, atomically (`Ok(false)`: the name is taken).
fn put_in_place(temp: &mut TempName<'_>, name: &OsStr, overwrite: bool) -> Result<bool, Errno> {
    let dir = temp.dir;
    if overwrite {
        renameat(dir, temp.name.as_str(), dir, name)?;
        temp.keep = true;
        return Ok(true);
    }
    match renameat_with(dir, temp.name.as_str(), dir, name, RenameFlags::NOREPLACE) {
        Ok(()) => {
            temp.keep = true;
            return Ok(true);
        }
        Err(Errno::EXIST) => return Ok(false),
        // A file system without `RENAME_NOREPLACE`: on to a hard link.
        Err(Errno::INVAL) => {}
        Err(e) => return Err(e),
    }
    // A hard link refuses an existing name atomically too; the temporary name goes when `temp`
    // drops, so the file is left with one link.
    match linkat(dir, temp.name.as_str(), dir, name, AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(Errno::EXIST) => Ok(false),
        Err(_) => {
            // Nor hard links: check, then rename.
            if statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
                return Ok(false);
            }
            renameat(dir, temp.name.as_str(), dir, name)?;
            temp.keep = true;
            Ok(true)
        }
    }
}
