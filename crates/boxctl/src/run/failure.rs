//! Why a command stopped early, its exit code, and how it is said: one line on stderr, and
//! with `--json` also one JSON object on stdout in the shape of loopd's error answers
//! (`{"error":{"code","kind","message"}}`), so that a script reads every error one way.

use super::out_line;
use crate::cli::{
    EXIT_BUDGET, EXIT_BUSY, EXIT_FAILED, EXIT_NO_APPROVAL, EXIT_NO_SCHEDULE, EXIT_TIMEOUT,
    EXIT_UNKNOWN_SESSION, EXIT_UNREACHABLE, EXIT_USAGE,
};
use crate::client::ClientError;
use bxcore::ApprovalId;
use proto::api::ApiError;
use std::io;

/// The `kind` words of boxctl's own errors (their `code` is 0: loopd gave no answer); an
/// error answer from loopd keeps its own kind ([`proto::api::error_kind`]).
pub mod error_kind {
    /// loopd is not running at the socket, or cannot be connected to (exit 2).
    pub const UNREACHABLE: &str = "unreachable";
    /// The connection to loopd broke, or loopd ended a stream early (exit 2).
    pub const LOST: &str = "lost";
    /// loopd did not connect, answer or speak within its limit (exit 8).
    pub const TIMED_OUT: &str = "timed_out";
    /// loopd's answer was not what the API says (exit 1).
    pub const PROTOCOL: &str = "protocol";
    /// The command line, or `task -`'s text on stdin, was wrong (exit 64).
    pub const USAGE: &str = "usage";
    /// Something on boxctl's own side failed before anything was sent (exit 1).
    pub const LOCAL: &str = "local";
}

/// Why a command stopped early.
#[derive(Debug)]
pub(crate) enum Failure {
    Client(ClientError),
    Output(io::Error),
    /// Something on this side, before anything was sent (no task id could be made).
    Local(String),
    /// The input was wrong, found before anything was sent (`task -`'s text).
    Usage(String),
    /// loopd has no call waiting under this approval id (HTTP 404).
    NoApproval(ApprovalId, ClientError),
    /// loopd has no schedule of this name (HTTP 404).
    NoSchedule(String, ClientError),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        Failure::Client(e)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::Output(e)
    }
}

/// The exit code for an error talking to loopd (see [`crate::cli`]).
pub fn exit_code(error: &ClientError) -> u8 {
    match error {
        ClientError::Unreachable { .. } | ClientError::Lost { .. } => EXIT_UNREACHABLE,
        ClientError::TimedOut { .. } => EXIT_TIMEOUT,
        ClientError::Api { status: 409, .. } => EXIT_BUSY,
        ClientError::Api { status: 429, error }
            if error.error.kind == proto::api::error_kind::BUDGET =>
        {
            EXIT_BUDGET
        }
        ClientError::Api { status: 404, .. } => EXIT_UNKNOWN_SESSION,
        ClientError::Api { .. } | ClientError::Protocol(_) => EXIT_FAILED,
    }
}

/// The JSON object for `error`: loopd's answer as it came, or boxctl's own in its shape.
pub fn client_error_json(error: &ClientError) -> ApiError {
    let kind = match error {
        ClientError::Api { error, .. } => return error.clone(),
        ClientError::Unreachable { .. } => error_kind::UNREACHABLE,
        ClientError::Lost { .. } => error_kind::LOST,
        ClientError::TimedOut { .. } => error_kind::TIMED_OUT,
        ClientError::Protocol(_) => error_kind::PROTOCOL,
    };
    ApiError::new(0, kind, error.to_string())
}

/// With `--json`, `error` as one line of JSON on stdout (nothing when stdout is gone).
fn print_json(error: &ApiError, json: bool) {
    if json && let Ok(raw) = serde_json::to_string(error) {
        let _ = out_line(&raw);
    }
}

/// Says `failure` (stderr; with `json`, stdout too) and gives its exit code.
pub(crate) fn report(failure: &Failure, json: bool) -> u8 {
    match failure {
        Failure::Client(e) => {
            print_json(&client_error_json(e), json);
            eprintln!("boxctl: {e}");
            exit_code(e)
        }
        Failure::NoApproval(id, e) => {
            print_json(&client_error_json(e), json);
            eprintln!("boxctl: no such approval {id}: answered, timed out, or never asked ({e})");
            EXIT_NO_APPROVAL
        }
        Failure::NoSchedule(name, e) => {
            print_json(&client_error_json(e), json);
            eprintln!("boxctl: no such schedule {name}; boxctl schedules lists them ({e})");
            EXIT_NO_SCHEDULE
        }
        Failure::Local(why) => {
            print_json(&ApiError::new(0, error_kind::LOCAL, why.as_str()), json);
            eprintln!("boxctl: {why}");
            EXIT_FAILED
        }
        Failure::Usage(why) => {
            print_json(&ApiError::new(0, error_kind::USAGE, why.as_str()), json);
            eprintln!("boxctl: {why}");
            EXIT_USAGE
        }
        Failure::Output(e) => {
            // Stdout is what failed: no JSON there.
            if e.kind() != io::ErrorKind::BrokenPipe {
                eprintln!("boxctl: cannot write to stdout: {e}");
            }
            EXIT_FAILED
        }
    }
}

/// Whether a command line (the program's name first) asks for `--json`: before a `--`, as
/// clap reads it. For a command line clap refused, so that its error is JSON too.
pub fn json_requested<I, S>(args: I) -> bool
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    args.into_iter()
        .skip(1)
        .map(|arg| arg.as_ref().to_owned())
        .take_while(|arg| arg != "--")
        .any(|arg| arg == "--json")
}

/// The JSON object for a command line clap refused: kind `usage`, its first line as the
/// message (without clap's `error: `).
pub fn usage_error_json(error: &clap::Error) -> ApiError {
    let rendered = error.render().to_string();
    let first = rendered.lines().next().unwrap_or_default();
    let message = first.strip_prefix("error: ").unwrap_or(first).trim();
    ApiError::new(0, error_kind::USAGE, message)
}
