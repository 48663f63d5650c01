//! Applies the steps read from an overlay's upper directory ([`super::upper`]) to the tree
//! itself, beneath its pinned descriptor, following no symlink. Each step is idempotent and
//! checks what it replaces, so the same steps can be applied again after a crash
//! ([`super::layers`]): a step already in place is left as it is, and a step whose target is
//! neither what the run saw nor what it left (something else changed it meanwhile) is not
//! applied, and named.

use super::CheckpointError;
use super::tree::Entry;
use super::upper::{Step, kind_in, open_beneath, open_dir, read};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, openat};
use rustix::io::Errno;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The prefix of the temporary names a write or a symlink is made under, beside its target.
pub const TEMP_PREFIX: &str = ".brokerd-apply-";

/// Numbers the temporary names of this process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// What applying needs beside the tree and the steps.
pub struct Applier<'a> {
    /// The content of a blob, by digest.
    pub blob: &'a dyn Fn(&str) -> Option<Vec<u8>>,
    /// The owner given to what is made (the sandbox's user, when it is not brokerd's).
    pub owner: Option<(u32, u32)>,
    /// The most bytes of one file read to compare.
    pub file_bytes: u64,
}

/// How one step went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Done now, or found done already.
    Done,
    /// Not applied: what is there is neither what the run saw nor what it left.
    Conflict(String),
}

/// Applies `step` beneath `top`.
pub fn apply(top: &OwnedFd, step: &Step, how: &Applier<'_>) -> Result<Applied, CheckpointError> {
    let rel = rel_of(step);
    let (Some(parent_rel), Some(name)) = (rel.parent(), rel.file_name()) else {
        return Ok(Applied::Conflict(format!(
            "{} is not beneath the tree",
            rel.display()
        )));
    };
    let name = Path::new(name);
    let Ok(parent) = open_beneath(top, parent_rel) else {
        return Ok(Applied::Conflict(format!(
            "{} is no longer a directory",
            parent_rel.display()
        )));
    };
    let now = kind_in(&parent, name);
    let io = |e: Errno| CheckpointError::Io {
        what: "apply the change set at",
        path: rel.to_path_buf(),
        source: e.into(),
    };
    match step {
        Step::MakeDir { mode, .. } => match now {
            Some(FileType::Directory) => Ok(Applied::Done),
            Some(_) => Ok(conflict(rel, "is not a directory")),
            None => {
                rustix::fs::mkdirat(&parent, name.as_os_str(), Mode::from_raw_mode(0o700))
                    .map_err(io)?;
                let made = open_dir(&parent, name, rel)?;
                own(&made, how.owner).map_err(io)?;
                rustix::fs::fchmod(&made, Mode::from_raw_mode(*mode)).map_err(io)?;
                Ok(Applied::Done)
            }
        },
        Step::Write { before, after, .. } => {
            if now == Some(FileType::Directory) {
                return Ok(conflict(rel, "is a directory"));
            }
            let current = current(&parent, name, now, how, rel)?;
            if current.as_ref() == Some(after) {
                return Ok(Applied::Done);
            }
            if current.as_ref() != before.as_ref() {
                return Ok(conflict(rel, "was changed by something else"));
            }
            let Some(content) = (how.blob)(&after.sha256) else {
                return Ok(conflict(rel, "has lost the content to write"));
            };
            replace_with_file(&parent, name, &content, after.mode, how.owner).map_err(io)?;
            Ok(Applied::Done)
        }
        Step::Remove { before, .. } => {
            match now {
                None => return Ok(Applied::Done),
                Some(FileType::Directory) => return Ok(conflict(rel, "is a directory")),
                Some(FileType::RegularFile) => {
                    if current(&parent, name, now, how, rel)?.as_ref() != before.as_ref() {
                        return Ok(conflict(rel, "was changed by something else"));
                    }
                }
                Some(_) => {}
            }
            rustix::fs::unlinkat(&parent, name.as_os_str(), AtFlags::empty()).map_err(io)?;
            Ok(Applied::Done)
        }
        Step::RemoveDir { .. } => match now {
            None => Ok(Applied::Done),
            Some(FileType::Directory) => {
                match rustix::fs::unlinkat(&parent, name.as_os_str(), AtFlags::REMOVEDIR) {
                    Ok(()) => Ok(Applied::Done),
                    Err(Errno::NOTEMPTY) => Ok(conflict(rel, "holds files the run did not see")),
                    Err(e) => Err(io(e)),
                }
            }
            Some(_) => Ok(conflict(rel, "is not a directory")),
        },
        Step::Symlink { target, .. } => {
            match now {
                Some(FileType::Directory) => return Ok(conflict(rel, "is a directory")),
                Some(FileType::Symlink) => {
                    let there = rustix::fs::readlinkat(&parent, name.as_os_str(), Vec::new())
                        .map_err(io)?;
                    if there.as_bytes() == target.as_os_str().as_encoded_bytes() {
                        return Ok(Applied::Done);
                    }
                }
                _ => {}
            }
            let temp = temp_name();
            rustix::fs::symlinkat(target.as_os_str(), &parent, temp.as_os_str()).map_err(io)?;
            if let Some((uid, gid)) = how.owner {
                let owner = (
                    Some(rustix::fs::Uid::from_raw(uid)),
                    Some(rustix::fs::Gid::from_raw(gid)),
                );
                rustix::fs::chownat(
                    &parent,
                    temp.as_os_str(),
                    owner.0,
                    owner.1,
                    AtFlags::SYMLINK_NOFOLLOW,
                )
                .map_err(io)?;
            }
            rename_into(&parent, &temp, name).map_err(io)?;
            Ok(Applied::Done)
        }
    }
}

/// The path a step is at.
pub fn rel_of(step: &Step) -> &Path {
    match step {
        Step::MakeDir { rel, .. }
        | Step::Write { rel, .. }
        | Step::Remove { rel, .. }
        | Step::RemoveDir { rel }
        | Step::Symlink { rel, .. } => rel,
    }
}

fn conflict(rel: &Path, why: &str) -> Applied {
    Applied::Conflict(format!("{} {why}", rel.display()))
}

/// The entry of the regular file `name` in `parent`, when one is there.
fn current(
    parent: &OwnedFd,
    name: &Path,
    now: Option<FileType>,
    how: &Applier<'_>,
    rel: &Path,
) -> Result<Option<Entry>, CheckpointError> {
    if now != Some(FileType::RegularFile) {
        return Ok(None);
    }
    let stat =
        rustix::fs::statat(parent, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(|e| {
            CheckpointError::Io {
                what: "apply the change set at",
                path: rel.to_path_buf(),
                source: e.into(),
            }
        })?;
    let content = read(parent, name, how.file_bytes, rel)?;
    Ok(Some(Entry {
        sha256: super::digest(&content),
        bytes: content.len() as u64,
        mode: stat.st_mode & 0o777,
    }))
}

/// Writes `content` to a new file beside `name`, synced, and renames it over `name`.
fn replace_with_file(
    parent: &OwnedFd,
    name: &Path,
    content: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
) -> Result<(), Errno> {
    let temp = temp_name();
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = openat(parent, temp.as_os_str(), flags, Mode::from_raw_mode(0o600))?;
    let written = (|| {
        let mut file = std::fs::File::from(fd);
        file.write_all(content)
            .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
        own(&file, owner)?;
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
        rustix::fs::fsync(&file)
    })();
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(parent, temp.as_os_str(), AtFlags::empty());
        return Err(e);
    }
    rename_into(parent, &temp, name)
}

fn rename_into(parent: &OwnedFd, temp: &Path, name: &Path) -> Result<(), Errno> {
    let renamed = rustix::fs::renameat(parent, temp.as_os_str(), parent, name.as_os_str());
    if renamed.is_err() {
        let _ = rustix::fs::unlinkat(parent, temp.as_os_str(), AtFlags::empty());
    }
    renamed
}

fn own(fd: impl AsFd, owner: Option<(u32, u32)>) -> Result<(), Errno> {
    let Some((uid, gid)) = owner else {
        return Ok(());
    };
    rustix::fs::fchown(
        fd,
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
    )
}

/// Removes from each directory `steps` change beneath `top` the temporary files a process of
/// pid `pid` left there (a kill -9 between making one and renaming it).
pub fn remove_temps(top: &OwnedFd, steps: &[Step], pid: u32) {
    let prefix = format!("{TEMP_PREFIX}{pid}-");
    let parents: std::collections::BTreeSet<&Path> =
        steps.iter().filter_map(|s| rel_of(s).parent()).collect();
    for parent in parents {
        let Ok(dir) = open_beneath(top, parent) else {
            continue;
        };
        for name in super::tree::names(&dir).unwrap_or_default() {
            if name.to_string_lossy().starts_with(&prefix) {
                let _ = rustix::fs::unlinkat(&dir, name.as_os_str(), AtFlags::empty());
            }
        }
    }
}

fn temp_name() -> PathBuf {
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    PathBuf::from(format!("{TEMP_PREFIX}{}-{n}", std::process::id()))
}
