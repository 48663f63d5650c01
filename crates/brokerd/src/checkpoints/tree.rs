//! The regular files beneath one directory, each with its digest, size and permission bits: what
//! an `exec` under `rw_paths` could change, taken before and after its run ([`super::runs`]).
//!
//! The walk starts from a descriptor (the pinned `rw_paths` entry), opens every directory and
//! file relative to its parent's descriptor with `O_NOFOLLOW`, and follows no symlink: a
//! symlink, a device or a socket is not a file here, and neither is read nor recorded.

use super::{CheckpointError, digest};
use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, openat, statat};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The most files one tree may hold to be taken: an `exec` under an `rw_paths` entry holding
/// more is refused before it runs, since what it changes could not be kept.
pub const MAX_TREE_FILES: usize = 10_000;
/// The most directories deep a tree is walked; deeper ones make the walk fail.
pub const MAX_TREE_DEPTH: usize = 64;

/// One regular file of a tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The digest of its content.
    pub sha256: String,
    /// Its size.
    pub bytes: u64,
    /// Its permission bits.
    pub mode: u32,
}

/// The regular files of a tree by their path beneath its top.
pub type Tree = BTreeMap<PathBuf, Entry>;

/// What a walk calls with each file: its path beneath the top, its content and its entry.
pub type EachFile<'a> = dyn FnMut(&Path, &[u8], &Entry) -> Result<(), CheckpointError> + 'a;

/// What a walk may take: the most bytes of one file, and of all of them.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The most bytes of one file.
    pub file_bytes: u64,
    /// The most bytes of all files.
    pub total_bytes: u64,
}

/// Walks the directory `top` (any descriptor of it, `O_PATH` too), calling `each` with every
/// regular file's path beneath it, content and entry; the tree of them. A tree past `limits` or
/// [`MAX_TREE_FILES`], or a file or directory that cannot be read, fails the walk, naming it.
pub fn scan(
    top: BorrowedFd<'_>,
    top_path: &Path,
    limits: Limits,
    each: &mut EachFile<'_>,
) -> Result<Tree, CheckpointError> {
    let failed = |rel: &Path, e: std::io::Error| CheckpointError::Io {
        what: "read",
        path: top_path.join(rel),
        source: e,
    };
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let first =
        openat(top, ".", dir_flags, Mode::empty()).map_err(|e| failed(Path::new(""), e.into()))?;
    let mut tree = Tree::new();
    let mut total = 0u64;
    let mut stack: Vec<(OwnedFd, PathBuf)> = vec![(first, PathBuf::new())];
    while let Some((dir, rel)) = stack.pop() {
        if rel.components().count() > MAX_TREE_DEPTH {
            return Err(failed(
                &rel,
                too_much("directories deeper than", MAX_TREE_DEPTH as u64),
            ));
        }
        for name in names(&dir).map_err(|e| failed(&rel, e.into()))? {
            let path = rel.join(&name);
            let stat = match statat(&dir, name.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => stat,
                // Gone between the listing and now: nothing to take.
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(failed(&path, e.into())),
            };
            match FileType::from_raw_mode(stat.st_mode) {
                FileType::Directory => {
                    let fd = openat(&dir, name.as_os_str(), dir_flags, Mode::empty())
                        .map_err(|e| failed(&path, e.into()))?;
                    stack.push((fd, path));
                }
                FileType::RegularFile => {
                    if tree.len() >= MAX_TREE_FILES {
                        return Err(failed(
                            &rel,
                            too_much("more files than", MAX_TREE_FILES as u64),
                        ));
                    }
                    let content = read_file(dir.as_fd(), &name, limits.file_bytes)
                        .map_err(|e| failed(&path, e))?;
                    total = total.saturating_add(content.len() as u64);
                    if total > limits.total_bytes {
                        return Err(failed(
                            Path::new(""),
                            too_much("more bytes than", limits.total_bytes),
                        ));
                    }
                    let entry = Entry {
                        sha256: digest(&content),
                        bytes: content.len() as u64,
                        mode: stat.st_mode & 0o777,
                    };
                    each(&path, &content, &entry)?;
                    tree.insert(path, entry);
                }
                _ => {}
            }
        }
    }
    Ok(tree)
}

/// The names in directory `dir`, but `.` and `..`, sorted.
pub(super) fn names(dir: &OwnedFd) -> Result<Vec<PathBuf>, Errno> {
    let mut names = Vec::new();
    for entry in Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(PathBuf::from(OsStr::from_bytes(name)));
        }
    }
    names.sort();
    Ok(names)
}

/// The content of `name` in `dir`, following no symlink, at most `cap_bytes`.
fn read_file(dir: BorrowedFd<'_>, name: &Path, cap_bytes: u64) -> std::io::Result<Vec<u8>> {
    // Non-blocking: a FIFO swapped in since the listing opens at once (and reads nothing)
    // instead of waiting for a writer.
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = openat(dir, name.as_os_str(), flags, Mode::empty())?;
    let mut content = Vec::new();
    std::fs::File::from(fd)
        .take(cap_bytes.saturating_add(1))
        .read_to_end(&mut content)?;
    if content.len() as u64 > cap_bytes {
        return Err(too_much("a file of more bytes than", cap_bytes));
    }
    Ok(content)
}

/// The error of a tree past a limit.
fn too_much(what: &str, limit: u64) -> std::io::Error {
    std::io::Error::other(format!(
        "holds {what} {limit}, too much to keep for an undo"
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn walk(top: &Path, limits: Limits) -> Result<Tree, CheckpointError> {
        let fd = rustix::fs::open(top, OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        scan(fd.as_fd(), top, limits, &mut |_, _, _| Ok(()))
    }

    const WIDE: Limits = Limits {
        file_bytes: 1 << 20,
        total_bytes: 1 << 20,
    };

    #[test]
    fn a_tree_holds_its_regular_files_and_no_symlink() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join("top.txt"), "top").unwrap();
        std::fs::write(dir.path().join("a/b/deep.txt"), "deep").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("a/link")).unwrap();
        let tree = walk(dir.path(), WIDE).unwrap();
        let paths: Vec<&Path> = tree.keys().map(PathBuf::as_path).collect();
        assert_eq!(paths, [Path::new("a/b/deep.txt"), Path::new("top.txt")]);
        assert_eq!(tree[Path::new("top.txt")].sha256, digest(b"top"));
        assert_eq!(tree[Path::new("top.txt")].bytes, 3);
    }

    #[test]
    fn a_tree_past_its_bytes_fails_naming_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("one"), "12345").unwrap();
        std::fs::write(dir.path().join("two"), "12345").unwrap();
        let limits = Limits {
            file_bytes: 100,
            total_bytes: 8,
        };
        let error = walk(dir.path(), limits).unwrap_err().to_string();
        assert!(error.contains("more bytes than 8"), "{error}");
        let limits = Limits {
            file_bytes: 4,
            total_bytes: 100,
        };
        let error = walk(dir.path(), limits).unwrap_err().to_string();
        assert!(error.contains("a file of more bytes than 4"), "{error}");
    }
}
