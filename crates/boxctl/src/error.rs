//! What can go wrong talking to loopd, and the error for one of its error answers.

use crate::limits::{Waited, gave_up};
use http::StatusCode;
use proto::api::ApiError;
use std::io;
use std::path::{Path, PathBuf};

/// What went wrong talking to loopd.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// loopd's socket could not be connected to.
    #[error("{}", unreachable_message(socket, *kind, detail))]
    Unreachable {
        /// The socket.
        socket: PathBuf,
        /// Why, as the OS said.
        kind: io::ErrorKind,
        /// The OS's words.
        detail: String,
    },
    /// The connection broke.
    #[error("lost the connection to loopd at {}: {reason}", socket.display())]
    Lost {
        /// The socket.
        socket: PathBuf,
        /// What happened.
        reason: String,
    },
    /// loopd did not connect, answer or speak on a stream within its limit (it may be stuck).
    #[error("{}", gave_up(socket, *waited, *limit_ms))]
    TimedOut {
        /// The socket.
        socket: PathBuf,
        /// What boxctl waited for.
        waited: Waited,
        /// The limit that ran out, in milliseconds.
        limit_ms: u64,
    },
    /// loopd answered with an error.
    #[error("{}", error.error.message)]
    Api {
        /// The HTTP status.
        status: u16,
        /// loopd's error body.
        error: ApiError,
    },
    /// loopd's answer was not what the API says.
    #[error("loopd's answer was not understood: {0}")]
    Protocol(String),
}

fn unreachable_message(socket: &Path, kind: io::ErrorKind, detail: &str) -> String {
    let at = socket.display();
    match kind {
        io::ErrorKind::NotFound => {
            format!("loopd is not running at {at} (no socket there); start it or set --socket")
        }
        io::ErrorKind::ConnectionRefused => {
            format!("loopd is not running at {at} (connection refused); start it or set --socket")
        }
        io::ErrorKind::PermissionDenied => format!(
            "cannot connect to loopd at {at} (permission denied); is this user in loopd's group?"
        ),
        _ => format!("cannot connect to loopd at {at} ({detail}); start it or set --socket"),
    }
}

pub(crate) fn lost(socket: &Path, reason: impl std::fmt::Display) -> ClientError {
    ClientError::Lost {
        socket: socket.to_path_buf(),
        reason: reason.to_string(),
    }
}

pub(crate) fn timed_out(socket: &Path, waited: Waited, limit_ms: u64) -> ClientError {
    ClientError::TimedOut {
        socket: socket.to_path_buf(),
        waited,
        limit_ms,
    }
}

/// The error for an answer of `status` with body `raw`: loopd's [`ApiError`] when the body is
/// one, else one made of the status and the text.
pub fn api_error(status: StatusCode, raw: &str) -> ClientError {
    let error = serde_json::from_str::<ApiError>(raw).unwrap_or_else(|_| {
        let text = raw.trim();
        let message = if text.is_empty() {
            format!("loopd answered {status}")
        } else {
            format!("loopd answered {status}: {text}")
        };
        ApiError::new(status.as_u16(), "unknown", message)
    });
    ClientError::Api {
        status: status.as_u16(),
        error,
    }
}
