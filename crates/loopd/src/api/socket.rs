//! Binding loopd's API socket: a stale file removed, mode 0660, optionally a group.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tokio::net::UnixListener;

/// The API socket's mode: read and write for its user and group, nothing for others.
pub const SOCKET_MODE: u32 = 0o660;

/// Why the API socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// `api.socket_group` names no group.
    #[error("api.socket_group {name:?}: no such group")]
    NoSuchGroup {
        /// The group name.
        name: String,
    },
    /// The group database could not be read.
    #[error("api.socket_group {name:?}: cannot look the group up: {source}")]
    GroupLookup {
        /// The group name.
        name: String,
        /// What failed.
        source: nix::Error,
    },
    /// Another process answers on the socket.
    #[error("{}: another process is listening on this socket (is loopd already running?)", path.display())]
    InUse {
        /// The socket.
        path: PathBuf,
    },
    /// Something other than a socket is at the path.
    #[error("{}: exists and is not a socket; refusing to replace it", path.display())]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// A file-system step failed.
    #[error("{}: cannot {step}: {source}", path.display())]
    Io {
        /// The socket.
        path: PathBuf,
        /// What was being done, e.g. `bind`.
        step: String,
        /// What failed.
        source: io::Error,
    },
}

fn io_error(path: &Path, step: impl Into<String>) -> impl FnOnce(io::Error) -> SocketError {
    let path = path.to_path_buf();
    let step = step.into();
    move |source| SocketError::Io { path, step, source }
}

/// The gid of group `name`.
pub fn resolve_group(name: &str) -> Result<u32, SocketError> {
    match nix::unistd::Group::from_name(name) {
        Ok(Some(group)) => Ok(group.gid.as_raw()),
        Ok(None) => Err(SocketError::NoSuchGroup {
            name: name.to_string(),
        }),
        Err(source) => Err(SocketError::GroupLookup {
            name: name.to_string(),
            source,
        }),
    }
}

/// Removes a socket file at `path` that nobody answers on; refuses to touch anything else.
fn remove_stale(path: &Path) -> Result<(), SocketError> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_error(path, "inspect the existing file")(e)),
    };
    if !meta.file_type().is_socket() {
        return Err(SocketError::NotASocket {
            path: path.to_path_buf(),
        });
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(SocketError::InUse {
            path: path.to_path_buf(),
        });
    }
    tracing::info!(path = %path.display(), "removing a stale socket");
    fs::remove_file(path).map_err(io_error(path, "remove the stale socket"))
}

/// Binds the API socket at `path`: removes a stale socket file there (one nobody answers
/// on), binds, sets mode [`SOCKET_MODE`], and gives it to group `gid` when one is set.
/// Must be called inside a tokio runtime.
pub fn bind_socket(path: &Path, gid: Option<u32>) -> Result<UnixListener, SocketError> {
    remove_stale(path)?;
    let listener = UnixListener::bind(path).map_err(io_error(path, "bind"))?;
    fs::set_permissions(path, fs::Permissions::from_mode(SOCKET_MODE))
        .map_err(io_error(path, "set mode 0660"))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid))
            .map_err(io_error(path, format!("give the socket to group {gid}")))?;
    }
    tracing::info!(path = %path.display(), ?gid, "loopd API socket bound");
    Ok(listener)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[tokio::test]
    async fn bind_replaces_a_stale_socket_and_refuses_a_live_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        let listener = bind_socket(&path, None).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, SOCKET_MODE);
        let err = bind_socket(&path, None).unwrap_err();
        assert!(matches!(err, SocketError::InUse { .. }), "{err}");
        drop(listener);
    }

    #[tokio::test]
    async fn bind_refuses_to_replace_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not-a-socket");
        fs::write(&path, b"keep me").unwrap();
        let err = bind_socket(&path, None).unwrap_err();
        assert!(err.to_string().contains("is not a socket"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"keep me");
    }

    #[tokio::test]
    async fn bind_gives_the_socket_to_our_own_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sock");
        let gid = nix::unistd::getegid().as_raw();
        let _listener = bind_socket(&path, Some(gid)).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().gid(), gid);
    }

    #[test]
    fn resolve_group_finds_root_and_names_a_missing_group() {
        assert_eq!(resolve_group("root").unwrap(), 0);
        let err = resolve_group("no-such-group-boxmaker-test").unwrap_err();
        assert!(matches!(err, SocketError::NoSuchGroup { .. }), "{err}");
    }
}
