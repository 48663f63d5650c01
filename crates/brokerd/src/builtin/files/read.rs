//! The work of `read_file` and `list_dir`: the checked path opened beneath its root
//! ([`super::beneath`]), then everything done on that fd (`fstat`, `read`, `getdents`), never on
//! the path again.
//!
//! The node is opened `O_RDONLY | O_NONBLOCK | O_NOCTTY` before its type is known, so a FIFO
//! put in its place cannot hang the call and a terminal is never made the controlling one; the
//! type is then checked on the fd.
//!
//! **Hard links.** A hard link under a root to a file outside it looks like any other file: no
//! path check can see where its other names are. So `read_file` refuses a regular file with more
//! than one link (`st_nlink > 1`) as `PathNotAllowed`, wherever its other names are, since they
//! cannot be found. brokerd's own writes never leave such a file (see [`super::write`]).

use super::beneath::{self, Root};
use super::paths::{self, Resolved};
use super::{MAX_LIST_ENTRIES, io_failed, text};
use crate::tool::{ToolError, ToolOutput};
use rustix::fs::{AtFlags, Dir, FileType, OFlags, Stat, fstat, statat};
use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// A checked, existing path opened beneath its root, with its type and status from the fd.
struct Opened {
    fd: OwnedFd,
    kind: FileType,
    stat: Stat,
}

/// Checks `arg` against `roots` and opens it for `what`; `missing` says what a path that does
/// not exist is ("file", "directory").
fn open_checked(
    what: &str,
    missing: &str,
    arg: &Path,
    roots: &[PathBuf],
) -> Result<Opened, ToolError> {
    let Resolved {
        root,
        rel,
        missing: n,
    } = paths::resolve_allowed(arg, roots)?;
    if n > 0 {
        return Err(ToolError::Failed(format!(
            "no such {missing}: {}",
            arg.display()
        )));
    }
    let failed = |e| beneath::open_failed(what, arg, e);
    let root = Root::open(&root).map_err(failed)?;
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = root.open_at(&rel, flags).map_err(failed)?;
    let stat = fstat(&fd).map_err(failed)?;
    Ok(Opened {
        fd,
        kind: FileType::from_raw_mode(stat.st_mode),
        stat,
    })
}

/// `read_file`'s work.
pub(crate) fn read_file(
    arg: &Path,
    roots: &[PathBuf],
    cap: usize,
) -> Result<ToolOutput, ToolError> {
    let opened = open_checked("read", "file", arg, roots)?;
    match opened.kind {
        FileType::RegularFile => {}
        FileType::Directory => {
            return Err(ToolError::Failed(format!(
                "{} is a directory, not a file (list_dir lists it)",
                arg.display()
            )));
        }
        _ => {
            return Err(ToolError::Failed(format!(
                "{} is not a regular file",
                arg.display()
            )));
        }
    }
    let links = opened.stat.st_nlink;
    if links > 1 {
        return Err(ToolError::PathNotAllowed(format!(
            "{} has {links} hard links; a file with more than one is not read, since its other \
             names may lie outside the allowed paths",
            arg.display()
        )));
    }
    // Read one byte past the cap, to know whether the file goes on.
    let limit = cap.saturating_add(1);
    let size = usize::try_from(opened.stat.st_size).unwrap_or(limit);
    let mut bytes = Vec::with_capacity(limit.min(size));
    File::from(opened.fd)
        .take(u64::try_from(limit).unwrap_or(u64::MAX))
        .read_to_end(&mut bytes)
        .map_err(|e| io_failed("read", arg, &e))?;
    let (content, truncated) = text::capped_text(&bytes, cap);
    Ok(ToolOutput { content, truncated })
}

/// `list_dir`'s work.
pub(crate) fn list_dir(arg: &Path, roots: &[PathBuf], cap: usize) -> Result<ToolOutput, ToolError> {
    let opened = open_checked("list", "directory", arg, roots)?;
    if opened.kind != FileType::Directory {
        return Err(ToolError::Failed(format!(
            "{} is not a directory (read_file reads a file)",
            arg.display()
        )));
    }
    let failed = |e: rustix::io::Errno| io_failed("list", arg, &e.into());
    let dir_fd = &opened.fd;
    let mut entries: Vec<(String, bool)> = Vec::new();
    let mut truncated = false;
    // `read_from` reads on its own open of the same directory, leaving `dir_fd` for `statat`.
    for entry in Dir::read_from(dir_fd).map_err(failed)? {
        let entry = entry.map_err(failed)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if entries.len() == MAX_LIST_ENTRIES {
            truncated = true;
            break;
        }
        // Some file systems do not say an entry's type: ask, without following a symlink.
        let is_dir = match entry.file_type() {
            FileType::Unknown => statat(dir_fd, entry.file_name(), AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Directory),
            kind => kind == FileType::Directory,
        };
        let name = OsStr::from_bytes(name).to_string_lossy().into_owned();
        entries.push((name, is_dir));
    }
    entries.sort();
    let mut content = String::new();
    for (name, is_dir) in entries {
        let mut line = if name.chars().any(char::is_control) {
            format!("{name:?}")
        } else {
            name
        };
        if is_dir {
            line.push('/');
        }
        line.push('\n');
        if content.len() + line.len() > cap {
            truncated = true;
            break;
        }
        content.push_str(&line);
    }
    Ok(ToolOutput { content, truncated })
}
