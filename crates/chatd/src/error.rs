//! What can stop chatd, each saying what it was doing.

use std::path::PathBuf;

/// Why chatd cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// A file of its state could not be read or written.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What the file is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file of its state holds something chatd did not write.
    #[error("{what} {} cannot be read: {why}; move it away to start afresh", path.display())]
    Corrupt {
        /// What the file is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The configuration cannot be used as it is.
    #[error("{0}")]
    Config(String),
    /// The homeserver refused or failed something chatd cannot go on without.
    #[error("the homeserver: {0}")]
    Matrix(String),
}
