//! Reading one secret's value: from its `file`, or from the systemd credential
//! `$CREDENTIALS_DIRECTORY/<name>`. The checks say what is wrong with the file, never what
//! is in it.

use super::SecretConfig;
use std::io::Read;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The environment variable systemd sets to the directory of a unit's credentials.
pub const CREDENTIALS_DIRECTORY: &str = "CREDENTIALS_DIRECTORY";
/// The largest secret value brokerd reads, in bytes.
pub const MAX_SECRET_BYTES: usize = 65_536;
/// The shortest secret value, in bytes: a shorter one would match ordinary text, and the
/// guard would deny and redact at random.
pub const MIN_SECRET_BYTES: usize = 8;

/// Why a secret could not be read. Names the secret and its file, never its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// No `file`, and no credentials directory to look in.
    #[error(
        "secret {name:?} has no file and ${CREDENTIALS_DIRECTORY} is not set: give it a file, \
         or load it as a systemd credential (LoadCredential={name}:PATH)"
    )]
    NoCredentialsDirectory {
        /// The secret.
        name: String,
    },
    /// The file cannot be opened or read.
    #[error("secret {name:?}: cannot read {}: {why}", path.display())]
    Unreadable {
        /// The secret.
        name: String,
        /// Its file.
        path: PathBuf,
        /// The system's words.
        why: String,
    },
    /// Not a regular file.
    #[error("secret {name:?}: {} is not a regular file", path.display())]
    NotAFile {
        /// The secret.
        name: String,
        /// Its file.
        path: PathBuf,
    },
    /// Every user may read it, or write it (and plant a value of their own).
    #[error(
        "secret {name:?}: {} is readable or writable by every user (mode {mode:04o}): make \
         it brokerd's user's only (chmod o-rw), or load it with LoadCredential=",
        path.display()
    )]
    WorldReadable {
        /// The secret.
        name: String,
        /// Its file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Its value is not usable: empty, too short or too long, or not UTF-8 text.
    #[error("secret {name:?}: the value in {} {why}", path.display())]
    BadValue {
        /// The secret.
        name: String,
        /// Its file.
        path: PathBuf,
        /// What is wrong, in words.
        why: String,
    },
    /// The guard's matcher could not be built.
    #[error("{0}")]
    Guard(#[from] super::guard::GuardError),
}

/// Where `secret`'s value is read from, `credentials` being `$CREDENTIALS_DIRECTORY`.
pub fn path_of(secret: &SecretConfig, credentials: Option<&Path>) -> Result<PathBuf, SecretError> {
    match (&secret.file, credentials) {
        (Some(file), _) => Ok(file.clone()),
        (None, Some(dir)) => Ok(dir.join(&secret.name)),
        (None, None) => Err(SecretError::NoCredentialsDirectory {
            name: secret.name.clone(),
        }),
    }
}

/// Reads `secret`'s value: a regular file, neither world-readable nor world-writable, UTF-8,
/// between [`MIN_SECRET_BYTES`] and [`MAX_SECRET_BYTES`] bytes once one final newline (`\n`
/// or `\r\n`, as editors and `echo` leave) is dropped.
pub fn read(secret: &SecretConfig, credentials: Option<&Path>) -> Result<String, SecretError> {
    let path = path_of(secret, credentials)?;
    let name = || secret.name.clone();
    let unreadable = |e: std::io::Error| SecretError::Unreadable {
        name: name(),
        path: path.clone(),
        why: e.kind().to_string(),
    };
    // Non-blocking: a FIFO put where the file should be would otherwise hang brokerd here
    // (before the check below could say it is not a file). A regular file reads as ever.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&path)
        .map_err(unreadable)?;
    // The opened file's own metadata: what is checked is what is read.
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(SecretError::NotAFile { name: name(), path });
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o006 != 0 {
        return Err(SecretError::WorldReadable {
            name: name(),
            path,
            mode,
        });
    }
    let mut bytes = Vec::new();
    file.take(MAX_SECRET_BYTES as u64 + 3)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    let bad = |why: String| SecretError::BadValue {
        name: name(),
        path: path.clone(),
        why,
    };
    let mut text = String::from_utf8(bytes).map_err(|_| bad("is not UTF-8 text".into()))?;
    if text.ends_with("\r\n") {
        text.truncate(text.len() - 2);
    } else if text.ends_with('\n') {
        text.truncate(text.len() - 1);
    }
    if text.len() > MAX_SECRET_BYTES {
        return Err(bad(format!("is longer than {MAX_SECRET_BYTES} bytes")));
    }
    if text.len() < MIN_SECRET_BYTES {
        return Err(bad(format!(
            "is {} bytes; the shortest is {MIN_SECRET_BYTES} (a shorter value would match \
             ordinary text)",
            text.len()
        )));
    }
    Ok(text)
}
