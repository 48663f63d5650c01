//! Binding a daemon's socket: a stale socket file replaced (never anything else), the mode the
//! daemon asks for, and optionally a group; and the group's name resolved to its gid.

use crate::Names;
use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use tokio::net::UnixListener;

/// Why a socket could not be set up. The messages name the daemon's config key and the daemon.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// The group key names no group.
    #[error("{key} {name:?}: no such group")]
    NoSuchGroup {
        /// The config key that named it.
        key: &'static str,
        /// The group name.
        name: String,
    },
    /// The group database could not be read.
    #[error("{key} {name:?}: cannot look the group up: {source}")]
    GroupLookup {
        /// The config key that named it.
        key: &'static str,
        /// The group name.
        name: String,
        /// What failed.
        source: nix::Error,
    },
    /// Another process answers on the socket.
    #[error("{}: another process is listening on this socket (is {daemon} already running?)", path.display())]
    InUse {
        /// The daemon that wanted it.
        daemon: &'static str,
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

/// The gid of group `name`, which the daemon's `names.group_key` gave.
pub fn resolve_group(names: &Names, name: &str) -> Result<u32, SocketError> {
    let key = names.group_key;
    match nix::unistd::Group::from_name(name) {
        Ok(Some(group)) => Ok(group.gid.as_raw()),
        Ok(None) => Err(SocketError::NoSuchGroup {
            key,
            name: name.to_string(),
        }),
        Err(source) => Err(SocketError::GroupLookup {
            key,
            name: name.to_string(),
            source,
        }),
    }
}

/// Removes a socket file at `path` that nobody answers on; refuses to touch anything else.
fn remove_stale(names: &Names, path: &Path) -> Result<(), SocketError> {
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
            daemon: names.daemon,
            path: path.to_path_buf(),
        });
    }
    tracing::info!(path = %path.display(), "removing a stale socket");
    fs::remove_file(path).map_err(io_error(path, "remove the stale socket"))
}

/// Binds the socket at `path`: removes a stale socket file there (one nobody answers on),
/// binds, sets `mode`, and gives it to group `gid` when one is set. The mode is the daemon's
/// policy (who else may connect is its choice). Must be called inside a tokio runtime.
pub fn bind_socket(
    names: &Names,
    path: &Path,
    mode: u32,
    gid: Option<u32>,
) -> Result<UnixListener, SocketError> {
    remove_stale(names, path)?;
    let listener = UnixListener::bind(path).map_err(io_error(path, "bind"))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .map_err(io_error(path, format!("set mode {mode:o}")))?;
    if let Some(gid) = gid {
        std::os::unix::fs::chown(path, None, Some(gid))
            .map_err(io_error(path, format!("give the socket to group {gid}")))?;
    }
    tracing::info!(daemon = names.daemon, path = %path.display(), mode = format!("{mode:o}"), ?gid, "socket bound");
    Ok(listener)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::os::unix::fs::MetadataExt;

    use crate::names::TEST_NAMES as NAMES;

    #[tokio::test]
    async fn bind_replaces_a_stale_socket_and_refuses_a_live_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        // A process another test forks at that moment holds the listener's fd until it execs,
        // and the socket answers until then: wait (bounded) until nothing does.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&path).is_ok() {
            assert!(
                std::time::Instant::now() < deadline,
                "the dropped socket still answers"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let listener = bind_socket(&NAMES, &path, 0o600, None).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        let err = bind_socket(&NAMES, &path, 0o600, None).unwrap_err();
        assert!(matches!(err, SocketError::InUse { .. }), "{err}");
        assert!(
            err.to_string().contains("is testd already running?"),
            "{err}"
        );
        drop(listener);
    }

    #[tokio::test]
    async fn bind_refuses_to_replace_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not-a-socket");
        fs::write(&path, b"keep me").unwrap();
        let err = bind_socket(&NAMES, &path, 0o660, None).unwrap_err();
        assert!(err.to_string().contains("is not a socket"), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"keep me");
    }

    #[tokio::test]
    async fn bind_gives_the_socket_its_mode_and_our_own_group() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sock");
        let gid = nix::unistd::getegid().as_raw();
        let _listener = bind_socket(&NAMES, &path, 0o660, Some(gid)).unwrap();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!((meta.mode() & 0o777, meta.gid()), (0o660, gid));
    }

    #[test]
    fn resolve_group_finds_root_and_names_a_missing_group_by_its_key() {
        assert_eq!(resolve_group(&NAMES, "root").unwrap(), 0);
        let err = resolve_group(&NAMES, "no-such-group-boxmaker-test").unwrap_err();
        assert!(matches!(err, SocketError::NoSuchGroup { .. }), "{err}");
        assert!(err.to_string().starts_with("test.socket_group "), "{err}");
    }
}
