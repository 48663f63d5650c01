//! Why boxd stops with an error.

use std::path::PathBuf;

/// Why boxd could not start or keep its children running. Every variant means boxd stops
/// every child it started and exits non-zero.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A child's config file does not have its pinned sha256.
    #[error(
        "{name}: refusing to start: config file {file} does not match its pinned sha256 \
         (expected {expected}, actual {actual})"
    )]
    PinMismatch {
        /// The child.
        name: String,
        /// Its config file.
        file: PathBuf,
        /// The pinned digest (`config_sha256`).
        expected: String,
        /// The digest the file has.
        actual: String,
    },
    /// A child's config file cannot be read to check its hash.
    #[error("{name}: refusing to start: cannot read config file {file}: {source}")]
    PinRead {
        /// The child.
        name: String,
        /// Its config file.
        file: PathBuf,
        /// Why it cannot be read.
        source: std::io::Error,
    },
    /// A child's program cannot be started.
    #[error("{name}: cannot start {command}: {source}")]
    Spawn {
        /// The child.
        name: String,
        /// Its program.
        command: String,
        /// Why it cannot be started.
        source: std::io::Error,
    },
    /// A child exited before it was ready.
    #[error("{name}: exited before it was ready ({status})")]
    ExitedEarly {
        /// The child.
        name: String,
        /// How it exited.
        status: String,
    },
    /// A child was not ready in time.
    #[error("{name}: not ready within {timeout_ms} ms ({last_check})")]
    NotReady {
        /// The child.
        name: String,
        /// Its `start_timeout_ms`, in milliseconds.
        timeout_ms: u64,
        /// What the last readiness check found.
        last_check: String,
    },
    /// The runtime dir cannot be created, locked or read.
    #[error("cannot use runtime_dir {dir}: {what}: {source}")]
    RuntimeDir {
        /// The `runtime_dir`.
        dir: PathBuf,
        /// What boxd was doing with it.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// Another boxd holds the runtime dir's lock.
    #[error(
        "another boxd runs with runtime_dir {dir} (it holds {lock}): refusing to start a second \
         one, which would take that one's children for leftovers of a dead boxd"
    )]
    AlreadyRunning {
        /// The `runtime_dir`.
        dir: PathBuf,
        /// Its lock file.
        lock: PathBuf,
    },
    /// A child died too often.
    #[error(
        "{name}: died again after {restarts} restarts within {window_ms} ms (restart.max_restarts): giving up"
    )]
    GaveUp {
        /// The child.
        name: String,
        /// How many restarts it had in the window.
        restarts: usize,
        /// The window, in milliseconds.
        window_ms: u64,
    },
}

impl Error {
    /// Whether retrying a start cannot help (the config file is wrong).
    pub fn is_pin(&self) -> bool {
        matches!(self, Error::PinMismatch { .. } | Error::PinRead { .. })
    }
}
