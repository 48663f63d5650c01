//! The store's files on disk: the index read back, and files made private and synced.

use super::{CheckpointError, Record};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The mode of the files.
pub(super) const FILE_MODE: u32 = 0o600;

/// The records of the index at `path`, the last line of each `seq`; a missing index is
/// empty. A last line cut short (a crash during its append) is left out.
pub(super) fn read_index(path: &Path) -> Result<BTreeMap<u64, Record>, CheckpointError> {
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
pub(super) fn new_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)
}

/// Syncs directory `dir`, so a rename in it is on disk.
pub(super) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Removes the temporary file a pending `record`'s write left beside its target, if any: opened
/// beneath the record's root through its fd, following no symlink (a file of that name
/// elsewhere is never touched). What cannot be removed is logged; it costs space only.
pub(super) fn remove_temp(record: &Record) {
    use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, open, openat2, unlinkat};
    let (Some(temp), Some(parent)) = (&record.temp, record.rel.parent()) else {
        return;
    };
    // Only a name of brokerd's temporary files, one component: never a path.
    if !temp.starts_with(".brokerd-write-") || temp.contains('/') {
        return;
    }
    let beneath = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let removed = open(&record.root, flags, Mode::empty())
        .and_then(|root| openat2(&root, parent, flags, Mode::empty(), beneath))
        .and_then(|dir| unlinkat(&dir, temp.as_str(), AtFlags::empty()));
    match removed {
        Ok(()) => {
            tracing::info!(path = %record.root.join(&record.rel).display(), "removed the temporary file of a write a crash cut short")
        }
        Err(rustix::io::Errno::NOENT) => {}
        Err(error) => {
            tracing::warn!(%error, path = %record.root.join(&record.rel).display(), "cannot remove the temporary file of a write a crash cut short")
        }
    }
}
