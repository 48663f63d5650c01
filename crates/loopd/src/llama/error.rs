//! What can go wrong talking to llama-server, and how its error answers are read.
//!
//! Errors are told apart by the server's `type`, never by its message text.

use serde::Deserialize;

/// The error `type` of a prompt that does not fit the slot's context.
pub const EXCEED_CONTEXT_TYPE: &str = "exceed_context_size_error";
/// The error `type` of a server that cannot answer now (e.g. "Loading model").
pub const UNAVAILABLE_TYPE: &str = "unavailable_error";
/// The most characters of a non-JSON error body quoted in an error message.
const MAX_QUOTED_BODY_CHARS: usize = 300;

/// Why a call to llama-server failed. The `Display` text is a sentence meant for the user
/// (`boxctl` shows it as is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InferError {
    /// The prompt does not fit the slot's context (`exceed_context_size_error`): the session
    /// must be compacted.
    #[error(
        "the conversation no longer fits the model's context: the prompt has {n_prompt_tokens} \
         tokens, a slot holds {n_ctx} (llama-server: {message})"
    )]
    SessionFull {
        /// Tokens in the prompt (0 when the server did not say).
        n_prompt_tokens: u64,
        /// The slot's context size in tokens (0 when the server did not say).
        n_ctx: u64,
        /// The server's message.
        message: String,
    },
    /// llama-server answered 503 (`unavailable_error`, e.g. "Loading model") on every try.
    #[error("llama-server is not available: {message}")]
    Unavailable {
        /// The server's message.
        message: String,
    },
    /// llama-server could not be reached (refused, reset before answering, connect timeout),
    /// on every try.
    #[error("cannot reach llama-server at {url}: {message}")]
    Connect {
        /// Where it was looked for.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The TLS handshake failed: the server's certificate was not accepted, or the server
    /// does not speak TLS as expected. Not retried (another try meets the same certificate),
    /// and not waited on at start.
    #[error("cannot talk to llama-server at {url} over TLS: {message}")]
    Tls {
        /// Where it was looked for.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// Any other HTTP error answer, with the server's status, type and message.
    #[error("llama-server failed (HTTP {status}{}): {message}", kind_note(.kind))]
    Server {
        /// The HTTP status.
        status: u16,
        /// The error `type` (empty when the answer had none).
        kind: String,
        /// The server's message.
        message: String,
    },
    /// The streamed answer broke off: an error event mid-stream (with the server's type and
    /// message), a malformed event, or a stream that ended without `[DONE]`.
    #[error("llama-server's answer broke off: {message}{}", type_note(.kind.as_deref()))]
    Stream {
        /// The server's error `type`, when it sent an error event.
        kind: Option<String>,
        /// The server's message, or what was wrong with the stream.
        message: String,
    },
    /// An answer loopd cannot read (e.g. `/props` without the fields it needs).
    #[error("llama-server sent an answer loopd cannot read: {message}")]
    BadResponse {
        /// What was wrong.
        message: String,
    },
    /// The request took longer than `llama.request_timeout_ms`.
    #[error("llama-server did not finish answering within {after_ms} ms")]
    Timeout {
        /// The limit that ran out, in milliseconds.
        after_ms: u64,
    },
    /// llama-server sent no byte for `llama.stall_timeout_ms` (a frozen or stuck server).
    #[error(
        "llama-server sent nothing for {after_ms} ms (llama.stall_timeout_ms): is it frozen \
         or overloaded?"
    )]
    Stalled {
        /// The limit that ran out, in milliseconds.
        after_ms: u64,
    },
    /// The call was cancelled.
    #[error("the model call was cancelled")]
    Cancelled,
    /// The client's configuration cannot be used (bad URL, unreadable API key file).
    #[error("the llama-server client is misconfigured: {message}")]
    BadConfig {
        /// What is wrong.
        message: String,
    },
    /// The call was waited for on a thread of the async runtime (a bug in loopd: see
    /// `blocking`); nothing was sent.
    #[error(transparent)]
    OnRuntimeThread(#[from] crate::blocking::OnRuntimeThread),
}

/// `, TYPE` after the status, or nothing when the answer had no type.
fn kind_note(kind: &str) -> String {
    if kind.is_empty() {
        String::new()
    } else {
        format!(", {kind}")
    }
}

/// ` (TYPE)` after a stream error's message, or nothing without a type.
fn type_note(kind: Option<&str>) -> String {
    kind.map(|k| format!(" ({k})")).unwrap_or_default()
}

impl InferError {
    /// Whether another try may succeed: 503 and connection errors.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            InferError::Unavailable { .. } | InferError::Connect { .. }
        )
    }

    /// Whether it tells that the endpoint itself is failing (so a new turn should go
    /// elsewhere): it could not be reached, stalled, took too long, broke off or garbled its
    /// answer, was unavailable (503) on every try, or a gateway in front of it answered 502 or
    /// 504. Not: a full context, another HTTP error answer (the server is up), a cancel, or a
    /// misconfigured loopd.
    pub fn is_endpoint_fault(&self) -> bool {
        match self {
            InferError::Connect { .. }
            | InferError::Tls { .. }
            | InferError::Stalled { .. }
            | InferError::Timeout { .. }
            | InferError::Stream { .. }
            | InferError::BadResponse { .. }
            | InferError::Unavailable { .. } => true,
            InferError::Server { status, .. } => matches!(status, 502 | 504),
            InferError::SessionFull { .. }
            | InferError::Cancelled
            | InferError::BadConfig { .. }
            | InferError::OnRuntimeThread(_) => false,
        }
    }

    /// Whether the server answered that it does not do this (501: llama-server's slot files
    /// without `--slot-save-path`).
    pub fn is_not_supported(&self) -> bool {
        matches!(self, InferError::Server { status: 501, .. })
    }

    /// Whether the server refused the request as it was (a 4xx answer: a slot file it cannot
    /// read, a name it does not take).
    pub fn is_refused(&self) -> bool {
        matches!(self, InferError::Server { status, .. } if (400..500).contains(status))
    }

    /// The error for an HTTP error answer with this status and body.
    pub(crate) fn from_answer(status: u16, body: &[u8]) -> InferError {
        match serde_json::from_slice::<ErrorDocument>(body) {
            Ok(doc) => InferError::from_error_object(Some(status), doc.error),
            Err(_) => {
                let text = String::from_utf8_lossy(body);
                let text = text.trim();
                let message = if text.is_empty() {
                    format!("HTTP {status} with an empty body")
                } else {
                    text.chars().take(MAX_QUOTED_BODY_CHARS).collect()
                };
                if status == 503 {
                    InferError::Unavailable { message }
                } else {
                    InferError::Server {
                        status,
                        kind: String::new(),
                        message,
                    }
                }
            }
        }
    }

    /// The error for an `{"error":{...}}` object, from an HTTP answer (`status`) or a stream
    /// (`None`).
    pub(crate) fn from_error_object(status: Option<u16>, error: ErrorObject) -> InferError {
        let ErrorObject {
            code,
            message,
            kind,
            n_prompt_tokens,
            n_ctx,
        } = error;
        let status = status.or(code).unwrap_or(0);
        match kind.as_deref() {
            Some(EXCEED_CONTEXT_TYPE) => InferError::SessionFull {
                n_prompt_tokens: n_prompt_tokens.unwrap_or(0),
                n_ctx: n_ctx.unwrap_or(0),
                message,
            },
            Some(UNAVAILABLE_TYPE) => InferError::Unavailable { message },
            None if status == 503 => InferError::Unavailable { message },
            _ => InferError::Server {
                status,
                kind: kind.unwrap_or_default(),
                message,
            },
        }
    }
}

/// `{"error":{...}}`.
#[derive(Debug, Deserialize)]
pub(crate) struct ErrorDocument {
    /// The error object.
    pub(crate) error: ErrorObject,
}

/// llama-server's error object: `{"code":N,"message":"...","type":"...", ...}`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ErrorObject {
    /// The HTTP status it stands for.
    #[serde(default)]
    code: Option<u16>,
    /// The message.
    #[serde(default)]
    message: String,
    /// The type.
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// With `exceed_context_size_error`: tokens in the prompt.
    #[serde(default)]
    n_prompt_tokens: Option<u64>,
    /// With `exceed_context_size_error`: the slot's context size.
    #[serde(default)]
    n_ctx: Option<u64>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn llama_error_exceed_context_is_session_full_on_400_and_500() {
        for status in [400, 500] {
            let body = format!(
                r#"{{"error":{{"code":{status},"type":"exceed_context_size_error",
                "message":"request (9000 tokens) exceeds the available context size (8192 tokens)",
                "n_prompt_tokens":9000,"n_ctx":8192}}}}"#
            );
            let e = InferError::from_answer(status, body.as_bytes());
            assert!(
                matches!(
                    e,
                    InferError::SessionFull {
                        n_prompt_tokens: 9000,
                        n_ctx: 8192,
                        ..
                    }
                ),
                "{e:?}"
            );
        }
    }

    #[test]
    fn llama_error_kinds_follow_the_type_not_the_message() {
        let e = InferError::from_answer(
            503,
            br#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#,
        );
        assert_eq!(
            e,
            InferError::Unavailable {
                message: "Loading model".into()
            }
        );
        assert!(e.is_retryable());
        let e = InferError::from_answer(
            500,
            br#"{"error":{"code":500,"message":"Loading model","type":"server_error"}}"#,
        );
        assert!(
            matches!(&e, InferError::Server { status: 500, kind, .. } if kind == "server_error")
        );
        assert!(!e.is_retryable());
        assert_eq!(
            e.to_string(),
            "llama-server failed (HTTP 500, server_error): Loading model"
        );
    }

    #[test]
    fn llama_error_non_json_bodies_are_quoted() {
        let e = InferError::from_answer(502, b"  Bad Gateway\n");
        assert_eq!(
            e,
            InferError::Server {
                status: 502,
                kind: String::new(),
                message: "Bad Gateway".into()
            }
        );
        assert!(InferError::from_answer(503, b"").is_retryable());
    }
}
