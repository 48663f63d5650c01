//! Whether stderr is the journal: systemd sets `JOURNAL_STREAM` to `DEVICE:INODE` (decimal) of
//! the stream it connected to stdout and stderr (systemd.exec(5), sd_journal_stream_fd(3)).
//! The variable alone says nothing about fd 2: a child inherits it with its stderr redirected
//! (boxd's children write to a pipe to boxd), so the stream must be fd 2's own.

use std::ffi::OsStr;
use std::os::fd::BorrowedFd;

/// The variable systemd sets to the device and inode of the journal stream it connected.
pub const JOURNAL_STREAM_ENV: &str = "JOURNAL_STREAM";

/// Whether this process's stderr is the journal stream that `JOURNAL_STREAM` names.
pub fn stderr_is_journal() -> bool {
    use std::os::fd::AsFd;
    is_journal_stream(
        std::env::var_os(JOURNAL_STREAM_ENV).as_deref(),
        std::io::stderr().as_fd(),
    )
}

/// Whether `fd` is the stream that `value` (`JOURNAL_STREAM`'s, `None` when unset) names: its
/// device and inode are the ones in `DEVICE:INODE`. A malformed value, or an `fd` that cannot
/// be examined, is not the journal.
pub fn is_journal_stream(value: Option<&OsStr>, fd: BorrowedFd<'_>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some((dev, ino)) = value.and_then(parse_journal_stream) else {
        return false;
    };
    // `fstat` through a duplicate: the same open file, so the same device and inode.
    let Ok(meta) = fd
        .try_clone_to_owned()
        .and_then(|owned| std::fs::File::from(owned).metadata())
    else {
        return false;
    };
    meta.dev() == dev && meta.ino() == ino
}

/// `DEVICE:INODE`, both decimal digits only, as systemd writes them.
fn parse_journal_stream(value: &OsStr) -> Option<(u64, u64)> {
    let (dev, ino) = value.to_str()?.split_once(':')?;
    Some((decimal(dev)?, decimal(ino)?))
}

/// `text` as a decimal number: digits only (no sign, no spaces).
fn decimal(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;

    /// `JOURNAL_STREAM`'s value for `file`.
    fn stream_of(file: &std::fs::File) -> String {
        let meta = file.metadata().unwrap();
        format!("{}:{}", meta.dev(), meta.ino())
    }

    #[test]
    fn the_stream_named_is_the_journal() {
        let file = tempfile::tempfile().unwrap();
        let value = stream_of(&file);
        assert!(is_journal_stream(Some(OsStr::new(&value)), file.as_fd()));
    }

    #[test]
    fn another_stream_is_not() {
        let file = tempfile::tempfile().unwrap();
        let other = tempfile::tempfile().unwrap();
        let value = stream_of(&other);
        assert!(!is_journal_stream(Some(OsStr::new(&value)), file.as_fd()));
        // The same inode on another device is another file.
        let meta = file.metadata().unwrap();
        let elsewhere = format!("{}:{}", meta.dev() + 1, meta.ino());
        assert!(!is_journal_stream(
            Some(OsStr::new(&elsewhere)),
            file.as_fd()
        ));
    }

    #[test]
    fn unset_is_not() {
        let file = tempfile::tempfile().unwrap();
        assert!(!is_journal_stream(None, file.as_fd()));
    }

    #[test]
    fn a_malformed_value_is_not() {
        let file = tempfile::tempfile().unwrap();
        let meta = file.metadata().unwrap();
        let (dev, ino) = (meta.dev(), meta.ino());
        for value in [
            String::new(),
            format!("{dev}"),
            format!("{dev}:"),
            format!(":{ino}"),
            format!("{dev}:{ino}:0"),
            format!("{dev}:{ino}x"),
            format!(" {dev}:{ino}"),
            format!("{dev};{ino}"),
            format!("0x{dev:x}:{ino}"),
        ] {
            assert!(
                !is_journal_stream(Some(OsStr::new(&value)), file.as_fd()),
                "{value:?}"
            );
        }
    }
}
