//! Opening a checked path beneath its root, through a directory fd of the root, so that nothing
//! changed in the tree after the check can lead the open outside.
//!
//! [`super::paths`] checks a path and gives it relative to its canonical root, with every symlink
//! already followed: the relative path holds only real directories and names. [`Root::open_at`]
//! opens it with `openat2` relative to the root's fd and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
//! | RESOLVE_NO_MAGICLINKS`: the kernel refuses any `..` that would climb out and any symlink on
//! the way, the last component included. So a directory swapped for a symlink between the check
//! and the open makes the open fail (`ELOOP`), where following the path again would have gone
//! wherever the symlink points. Such a failure is [`ToolError::PathNotAllowed`] ([`open_failed`]).
//! A directory swapped for another real directory under the root is followed: it is still under
//! the root.
//!
//! `openat2` needs Linux 5.6. Where it is missing (`ENOSYS`: an older kernel) or filtered
//! (`EPERM`: a seccomp profile that does not know it; the flags used here give no other cause for
//! `EPERM`), the same open is done by a walk: one `openat` per component relative to the fd of
//! the directory before it, each with `O_NOFOLLOW`, and a component that is a symlink refused.
//! Since the relative path has no `..`, the walk holds the same guarantee.
//!
//! Not guarded: mount points under a root (the owner makes them) are crossed like directories.

use crate::tool::ToolError;
use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, fstat, open, openat, openat2};
use rustix::io::Errno;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};

/// How `openat2` resolves a path beneath the root: never above it, never through a symlink.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_SYMLINKS)
    .union(ResolveFlags::NO_MAGICLINKS);

/// A root directory, opened once per call.
#[derive(Debug)]
pub(crate) struct Root {
    fd: OwnedFd,
}

impl Root {
    /// Opens the canonical root `path` (`O_PATH`: only a handle to resolve beneath).
    pub(crate) fn open(path: &Path) -> Result<Root, Errno> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(Root {
            fd: open(path, flags, Mode::empty())?,
        })
    }

    /// Opens `rel` (only normal components; empty for the root itself) beneath the root with
    /// `flags`, following no symlink; `ELOOP` when one is met. `O_CREAT` is not for this: a
    /// new file is created relative to its directory's fd.
    pub(crate) fn open_at(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
        let path = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        match openat2(
            &self.fd,
            path,
            flags | OFlags::CLOEXEC,
            Mode::empty(),
            RESOLVE,
        ) {
            Err(Errno::NOSYS | Errno::PERM) => walk(self.fd.as_fd(), rel, flags),
            result => result,
        }
    }
}

/// Opens `rel` beneath `dir` one component at a time, each relative to the fd of the last and
/// none followed if it is a symlink (`ELOOP`); anything but a normal component is `EXDEV`.
pub(crate) fn walk(dir: BorrowedFd<'_>, rel: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
    let mut names = Vec::new();
    for component in rel.components() {
        match component {
            Component::Normal(name) => names.push(name),
            _ => return Err(Errno::XDEV),
        }
    }
    let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW;
    let Some((last, parents)) = names.split_last() else {
        return openat(dir, ".", flags, Mode::empty());
    };
    let mut held: Option<OwnedFd> = None;
    for name in parents {
        let at = held.as_ref().map_or(dir, AsFd::as_fd);
        // `O_PATH | O_NOFOLLOW` opens a symlink itself, so its type can be told apart.
        let fd = openat(
            at,
            *name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        match FileType::from_raw_mode(fstat(&fd)?.st_mode) {
            FileType::Directory => held = Some(fd),
            FileType::Symlink => return Err(Errno::LOOP),
            _ => return Err(Errno::NOTDIR),
        }
    }
    let at = held.as_ref().map_or(dir, AsFd::as_fd);
    openat(at, *last, flags, Mode::empty())
}

/// Whether `e` from [`Root::open_at`] means the path no longer leads where it was checked to: a
/// symlink met (`ELOOP`), a climb out of the root (`EXDEV`), or a race the kernel could not rule
/// out (`EAGAIN`).
fn escaped(e: Errno) -> bool {
    matches!(e, Errno::LOOP | Errno::XDEV | Errno::AGAIN)
}

/// The error for `e` from opening `arg` beneath its root while doing `what` to it: an escape is
/// `PathNotAllowed`, anything else `Failed`.
pub(crate) fn open_failed(what: &str, arg: &Path, e: Errno) -> ToolError {
    if escaped(e) {
        ToolError::PathNotAllowed(format!(
            "{} is outside the allowed paths: a symlink on it leads out of its root (it changed \
             after it was checked)",
            arg.display()
        ))
    } else {
        super::io_failed(what, arg, &e.into())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::fs;
    use std::io::Read;
    use std::os::unix::fs::symlink;

    /// A tree: `root/` with `sub/f.txt` and symlinks `inner` (to `sub`) and `out` (to
    /// `outside/`, which holds `f.txt` too).
    fn tree() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::create_dir(dir.path().join("outside")).unwrap();
        fs::write(root.join("sub/f.txt"), "inside").unwrap();
        fs::write(dir.path().join("outside/f.txt"), "outside").unwrap();
        symlink(root.join("sub"), root.join("inner")).unwrap();
        symlink(dir.path().join("outside"), root.join("out")).unwrap();
        let opened = Root::open(&root).unwrap();
        (dir, opened)
    }

    fn read(fd: OwnedFd) -> String {
        let mut s = String::new();
        fs::File::from(fd).read_to_string(&mut s).unwrap();
        s
    }

    #[test]
    fn open_at_opens_real_paths_and_refuses_every_symlink() {
        let (_dir, root) = tree();
        let fd = root
            .open_at(Path::new("sub/f.txt"), OFlags::RDONLY)
            .unwrap();
        assert_eq!(read(fd), "inside");
        root.open_at(Path::new(""), OFlags::RDONLY).unwrap();
        // A symlink is refused even when it stays inside: the checked path has none.
        for rel in ["inner/f.txt", "out/f.txt", "out", "inner"] {
            let e = root.open_at(Path::new(rel), OFlags::RDONLY).unwrap_err();
            assert_eq!(e, Errno::LOOP, "{rel}");
        }
        let e = root.open_at(Path::new("../root/sub/f.txt"), OFlags::RDONLY);
        assert_eq!(e.unwrap_err(), Errno::XDEV);
    }

    #[test]
    fn the_walk_opens_real_paths_and_refuses_every_symlink_and_dot_dot() {
        let (_dir, root) = tree();
        let fd = walk(root.fd.as_fd(), Path::new("sub/f.txt"), OFlags::RDONLY).unwrap();
        assert_eq!(read(fd), "inside");
        walk(root.fd.as_fd(), Path::new(""), OFlags::RDONLY).unwrap();
        for rel in ["inner/f.txt", "out/f.txt", "out", "inner"] {
            let e = walk(root.fd.as_fd(), Path::new(rel), OFlags::RDONLY).unwrap_err();
            assert_eq!(e, Errno::LOOP, "{rel}");
        }
        let e = walk(root.fd.as_fd(), Path::new("sub/f.txt/x"), OFlags::RDONLY);
        assert_eq!(e.unwrap_err(), Errno::NOTDIR);
        let e = walk(
            root.fd.as_fd(),
            Path::new("sub/../sub/f.txt"),
            OFlags::RDONLY,
        );
        assert_eq!(e.unwrap_err(), Errno::XDEV);
    }

    #[test]
    fn an_escape_is_not_allowed_and_other_errors_are_failures() {
        let arg = Path::new("/r/x");
        for e in [Errno::LOOP, Errno::XDEV, Errno::AGAIN] {
            assert!(
                matches!(open_failed("read", arg, e), ToolError::PathNotAllowed(m) if m.contains("/r/x"))
            );
        }
        assert!(matches!(
            open_failed("read", arg, Errno::NOENT),
            ToolError::Failed(m) if m.starts_with("cannot read /r/x: ")
        ));
    }
}
