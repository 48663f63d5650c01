//! Binding brokerd's socket: a stale socket file replaced, mode 0600 (or 0660 and a group).

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tokio::net::UnixListener;

/// The socket's mode with no `socket_group`: brokerd's user only.
pub const SOCKET_MODE_PRIVATE: u32 = 0o600;

/// The socket's mode with a `socket_group`: brokerd's user and that group.
pub const SOCKET_MODE_GROUP: u32 = 0o660;

/// Why the socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// `socket_group` names no group.
    #[error("socket_group {0:?}: no such group")]
    NoSuchGroup(String),
    /// The group database could not be read.
    #[error("socket_group {name:?}: cannot look the group up: {source}")]
    GroupLookup {
        /// The group name.
        name: String,
        /// What failed.
        source: nix::Error,
    },
    /// Another process answers on the socket.
    #[error("{}: another process is listening on this socket (is brokerd already running?)", .0.display())]
    InUse(PathBuf),
    /// Something other than a socket is at the path.
    #[error("{}: exists and is not a socket; refusing to replace it", .0.display())]
    NotASocket(PathBuf),
    /// A file-system step failed.
    #[error("{}: cannot {step}: {source}", path.display())]
    Io {
        /// The socket.
        path: PathBuf,
        /// What was being done.
        step: &'static str,
        /// What failed.
        source: io::Error,
    },
}

fn io_error(path: &Path, step: &'static str) -> impl FnOnce(io::Error) -> SocketError {
    let path = path.to_path_buf();
    move |source| SocketError::Io { path, step, source }
}

/// The gid of group `name`.
pub fn resolve_group(name: &str) -> Result<u32, SocketError> {
    match nix::unistd::Group::from_name(name) {
        Ok(Some(group)) => Ok(group.gid.as_raw()),
        Ok(None) => Err(SocketError::NoSuchGroup(name.to_string())),
        Err(source) => Err(SocketError::GroupLookup {
            name: name.to_string(),
            source,
        }),
    }
}

/// Removes a socket file at `path` nobody answers on; refuses to touch anything else.
fn remove_stale(path: &Path) -> Result<(), SocketError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(path, "inspect the existing file")(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket(path.to_path_buf()));
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(SocketError::InUse(path.to_path_buf()));
    }
    tracing::info!(path = %path.display(), "removing a stale socket");
    fs::remove_file(path).map_err(io_error(path, "remove the stale socket"))
}

/// Binds the socket at `path`: replaces a stale socket file, binds, and sets mode
/// [`SOCKET_MODE_PRIVATE`], or [`SOCKET_MODE_GROUP`] and group `gid` when one is given. Must be
/// called inside a tokio runtime.
pub fn bind_socket(path: &Path, gid: Option<u32>) -> Result<UnixListener, SocketError> {
    remove_stale(path)?;
    let listener = UnixListener::bind(path).map_err(io_error(path, "bind"))?;
    let mode = if gid.is_some() {
        SOCKET_MODE_GROUP
    } else {
        SOCKET_MODE_PRIVATE
    };
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(io_error(path, "set the socket's mode"))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid))
            .map_err(io_error(path, "give the socket to its group"))?;
    }
    tracing::info!(path = %path.display(), mode = format!("{mode:o}"), ?gid, "brokerd socket bound");
    Ok(listener)
}
