//! What an overlay's upper directory says a run changed ([`super::layers`]): read against the
//! tree it lay over (the lower layer, the `rw_paths` entry itself), as the steps that make the
//! tree what the run saw. The overlay writes its change set in its own terms: a changed or new
//! file is a file, a removed one a whiteout (a character device 0:0), a directory whose
//! lower content is hidden is marked `user.overlay.opaque = y` (a directory removed and made
//! again). The shim mounts it with `redirect_dir` and `metacopy` off, so a file in the upper
//! directory always holds its whole content.
//!
//! Both trees are walked from descriptors, opening every directory and file beneath its
//! parent's descriptor with `O_NOFOLLOW`: a symlink is read as a symlink, never followed.

use super::tree::{Entry, MAX_TREE_DEPTH, names};
use super::{CheckpointError, digest};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, openat, readlinkat, statat};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The most entries an upper directory may hold to be applied; past it the run's writes are
/// not applied, and the result says so.
pub const MAX_UPPER_ENTRIES: usize = 100_000;
/// The extended attribute that marks a directory whose lower content is hidden.
const OPAQUE_XATTR: &str = "user.overlay.opaque";

/// One step of making the tree what the run saw, beneath the tree's top.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// A directory is made.
    MakeDir {
        /// Where.
        rel: PathBuf,
        /// Its permission bits, as the run made it.
        mode: u32,
    },
    /// A file is written whole (its content is blob `after.sha256`), replacing what is there
    /// but a directory.
    Write {
        /// Where.
        rel: PathBuf,
        /// The regular file that was there, if one was.
        before: Option<Entry>,
        /// What is written.
        after: Entry,
    },
    /// A file, symlink or other non-directory is removed.
    Remove {
        /// Where.
        rel: PathBuf,
        /// The regular file that was there, if it was one.
        before: Option<Entry>,
    },
    /// An empty directory is removed (its content was removed by the steps before).
    RemoveDir {
        /// Where.
        rel: PathBuf,
    },
    /// A symlink is made, replacing what is there but a directory.
    Symlink {
        /// Where.
        rel: PathBuf,
        /// What it points to, as the run wrote it.
        target: PathBuf,
    },
}

/// What reading needs beside the two trees.
pub struct Reader<'a> {
    /// The most bytes of one file.
    pub file_bytes: u64,
    /// Keeps a file's content as a blob.
    pub keep: &'a mut dyn FnMut(&[u8]) -> Result<(), CheckpointError>,
    /// The entries seen so far.
    pub seen: usize,
    /// What was left out (a FIFO, a device), for the result's note.
    pub skipped: Vec<PathBuf>,
}

/// The steps that make the tree at `lower` what the overlay of `upper` showed the run,
/// parents before children; every content they write or remove is kept through `reader`.
pub fn steps(
    upper: BorrowedFd<'_>,
    lower: BorrowedFd<'_>,
    reader: &mut Reader<'_>,
) -> Result<Vec<Step>, CheckpointError> {
    let mut steps = Vec::new();
    let upper = open_dir(upper, Path::new("."), Path::new(""))?;
    let lower = open_dir(lower, Path::new("."), Path::new(""))?;
    walk(
        &upper,
        Some(&lower),
        Path::new(""),
        false,
        reader,
        &mut steps,
    )?;
    Ok(steps)
}

/// One directory of the upper tree over its lower one (none: the lower has no directory
/// there, or it is hidden). `opaque`: the lower's entries not in the upper one are gone.
fn walk(
    upper: &OwnedFd,
    lower: Option<&OwnedFd>,
    rel: &Path,
    opaque: bool,
    reader: &mut Reader<'_>,
    steps: &mut Vec<Step>,
) -> Result<(), CheckpointError> {
    if rel.components().count() > MAX_TREE_DEPTH {
        return Err(too_much(rel, "directories deeper than", MAX_TREE_DEPTH));
    }
    let in_upper = names(upper).map_err(|e| failed(rel, e.into()))?;
    if opaque && let Some(lower) = lower {
        let kept: BTreeSet<&PathBuf> = in_upper.iter().collect();
        for name in names(lower).map_err(|e| failed(rel, e.into()))? {
            if !kept.contains(&name) {
                remove_lower(lower, &name, &rel.join(&name), reader, steps)?;
            }
        }
    }
    for name in &in_upper {
        reader.seen += 1;
        if reader.seen > MAX_UPPER_ENTRIES {
            return Err(too_much(rel, "more entries than", MAX_UPPER_ENTRIES));
        }
        let path = rel.join(name);
        let stat = statat(upper, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| failed(&path, e.into()))?;
        let below = lower.and_then(|l| kind_in(l, name));
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                let child = open_dir(upper, name, &path)?;
                let hidden = opaque || is_opaque(&child);
                let lower_child = match (below, lower) {
                    (Some(FileType::Directory), Some(lower)) => Some(open_dir(lower, name, &path)?),
                    (Some(_), Some(lower)) => {
                        remove_lower(lower, name, &path, reader, steps)?;
                        None
                    }
                    _ => None,
                };
                if lower_child.is_none() {
                    steps.push(Step::MakeDir {
                        rel: path.clone(),
                        mode: stat.st_mode & 0o7777,
                    });
                }
                walk(&child, lower_child.as_ref(), &path, hidden, reader, steps)?;
            }
            FileType::RegularFile => {
                let content = read(upper, name, reader.file_bytes, &path)?;
                let after = entry(&content, stat.st_mode);
                let before = match (below, lower) {
                    (Some(FileType::RegularFile), Some(lower)) => {
                        let was = lower_entry(lower, name, &path, reader)?;
                        if was == after {
                            // Copied up and left as it was (opened for writing, touched).
                            continue;
                        }
                        Some(was)
                    }
                    (Some(FileType::Directory), Some(lower)) => {
                        remove_lower(lower, name, &path, reader, steps)?;
                        None
                    }
                    _ => None,
                };
                (reader.keep)(&content)?;
                steps.push(Step::Write {
                    rel: path,
                    before,
                    after,
                });
            }
            FileType::CharacterDevice if stat.st_rdev == 0 => {
                if let Some(lower) = lower.filter(|_| below.is_some()) {
                    remove_lower(lower, name, &path, reader, steps)?;
                }
            }
            FileType::Symlink => {
                let target = readlinkat(upper, name.as_os_str(), Vec::new())
                    .map_err(|e| failed(&path, e.into()))?;
                if let (Some(_), Some(lower)) = (below, lower) {
                    remove_lower(lower, name, &path, reader, steps)?;
                }
                steps.push(Step::Symlink {
                    rel: path,
                    target: PathBuf::from(OsStr::from_bytes(target.as_bytes())),
                });
            }
            _ => reader.skipped.push(path),
        }
    }
    Ok(())
}

/// The steps that remove `name` of the lower directory `dir` and all beneath it, each
/// regular file's content kept.
fn remove_lower(
    dir: &OwnedFd,
    name: &Path,
    rel: &Path,
    reader: &mut Reader<'_>,
    steps: &mut Vec<Step>,
) -> Result<(), CheckpointError> {
    reader.seen += 1;
    if reader.seen > MAX_UPPER_ENTRIES {
        return Err(too_much(rel, "more entries than", MAX_UPPER_ENTRIES));
    }
    if rel.components().count() > MAX_TREE_DEPTH {
        return Err(too_much(rel, "directories deeper than", MAX_TREE_DEPTH));
    }
    match kind_in(dir, name) {
        None => {}
        Some(FileType::Directory) => {
            let child = open_dir(dir, name, rel)?;
            for inner in names(&child).map_err(|e| failed(rel, e.into()))? {
                remove_lower(&child, &inner, &rel.join(&inner), reader, steps)?;
            }
            steps.push(Step::RemoveDir {
                rel: rel.to_path_buf(),
            });
        }
        Some(FileType::RegularFile) => {
            let before = lower_entry(dir, name, rel, reader)?;
            steps.push(Step::Remove {
                rel: rel.to_path_buf(),
                before: Some(before),
            });
        }
        Some(_) => steps.push(Step::Remove {
            rel: rel.to_path_buf(),
            before: None,
        }),
    }
    Ok(())
}

/// The entry of the lower file `name`, its content kept.
fn lower_entry(
    dir: &OwnedFd,
    name: &Path,
    rel: &Path,
    reader: &mut Reader<'_>,
) -> Result<Entry, CheckpointError> {
    let stat = statat(dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
        .map_err(|e| failed(rel, e.into()))?;
    let content = read(dir, name, reader.file_bytes, rel)?;
    (reader.keep)(&content)?;
    Ok(entry(&content, stat.st_mode))
}

fn entry(content: &[u8], mode: u32) -> Entry {
    Entry {
        sha256: digest(content),
        bytes: content.len() as u64,
        mode: mode & 0o777,
    }
}

/// What `name` in `dir` is, following no symlink; none when nothing is there.
pub(super) fn kind_in(dir: &impl AsFd, name: &Path) -> Option<FileType> {
    statat(dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|s| FileType::from_raw_mode(s.st_mode))
}

/// Whether the directory is marked opaque.
fn is_opaque(dir: &OwnedFd) -> bool {
    let mut value = [0u8; 8];
    rustix::fs::fgetxattr(dir, OPAQUE_XATTR, &mut value).is_ok_and(|n| value[..n] == *b"y")
}

/// Opens directory `name` beneath `dir` for reading, following no symlink.
pub(super) fn open_dir(
    dir: impl AsFd,
    name: &Path,
    rel: &Path,
) -> Result<OwnedFd, CheckpointError> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    openat(dir, name.as_os_str(), flags, Mode::empty()).map_err(|e| failed(rel, e.into()))
}

/// Opens directory `rel` beneath `top` one component at a time, following no symlink at any
/// of them (`O_NOFOLLOW` alone guards only the last).
pub(super) fn open_beneath(top: &OwnedFd, rel: &Path) -> Result<OwnedFd, CheckpointError> {
    let mut dir = open_dir(top, Path::new("."), Path::new(""))?;
    for part in rel.components() {
        let std::path::Component::Normal(name) = part else {
            return Err(failed(
                rel,
                std::io::Error::other("not a plain path beneath the tree"),
            ));
        };
        dir = open_dir(&dir, Path::new(name), rel)?;
    }
    Ok(dir)
}

/// The content of file `name` in `dir`, following no symlink, at most `cap_bytes`.
pub(super) fn read(
    dir: impl AsFd,
    name: &Path,
    cap_bytes: u64,
    rel: &Path,
) -> Result<Vec<u8>, CheckpointError> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd =
        openat(dir, name.as_os_str(), flags, Mode::empty()).map_err(|e| failed(rel, e.into()))?;
    let mut content = Vec::new();
    std::fs::File::from(fd)
        .take(cap_bytes.saturating_add(1))
        .read_to_end(&mut content)
        .map_err(|e| failed(rel, e))?;
    if content.len() as u64 > cap_bytes {
        return Err(too_much(
            rel,
            "a file of more bytes than",
            cap_bytes as usize,
        ));
    }
    Ok(content)
}

fn failed(rel: &Path, source: std::io::Error) -> CheckpointError {
    CheckpointError::Io {
        what: "read the change set at",
        path: rel.to_path_buf(),
        source,
    }
}

fn too_much(rel: &Path, what: &str, limit: usize) -> CheckpointError {
    failed(
        rel,
        std::io::Error::other(format!("holds {what} {limit}, too much to apply and keep")),
    )
}
