//! Error types: starting the server, reading a script, and errors answered over HTTP.

use std::path::PathBuf;

use http::StatusCode;
use serde_json::{Map, Value, json};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding the TCP listener failed.
    #[error("cannot listen on {addr}: {source}")]
    BindTcp {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Binding the Unix socket failed.
    #[error("cannot listen on unix socket {}: {source}", path.display())]
    BindUnix {
        /// The socket path asked for.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The slot save path ([`crate::Options::slot_save_path`]) is not an existing
    /// directory (llama-server's message).
    #[error("not a directory: {}", path.display())]
    SlotSavePath {
        /// The path given.
        path: PathBuf,
    },
}

/// Why a script could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The script file could not be read.
    #[error("cannot read script {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The script is not valid TOML, or its top level has an unknown or mistyped key.
    #[error("script is not valid: {0}")]
    Toml(String),
    /// One rule is malformed (unknown key, wrong type) or contradicts itself.
    #[error("script {rule}: {reason}")]
    Rule {
        /// Which rule: `rule 2 ("first step")` (1-based, with its name when it has one).
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// An error answered over HTTP in llama-server's shape:
/// `{"error":{"code":N,"message":"...","type":"..."}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status, also sent as `code`.
    pub status: StatusCode,
    /// The error `type`, e.g. `invalid_request_error`.
    pub kind: String,
    /// The human-readable `message`.
    pub message: String,
    /// Further fields inside the `error` object (e.g. `n_ctx`).
    pub extra: Map<String, Value>,
}

impl ApiError {
    /// An error with the given status, type and message.
    pub fn new(status: StatusCode, kind: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            kind: kind.to_owned(),
            message: message.into(),
            extra: Map::new(),
        }
    }

    /// `400 invalid_request_error`.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message)
    }

    /// `401 authentication_error` with llama-server's message.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "Invalid API Key",
        )
    }

    /// `404 not_found_error` with llama-server's message.
    pub fn not_found() -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found_error", "File Not Found")
    }

    /// `503 unavailable_error` "Loading model", answered while the model "loads".
    pub fn loading() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable_error",
            "Loading model",
        )
    }

    /// `400 exceed_context_size_error` for a prompt of `n_prompt_tokens` in a slot of `n_ctx`.
    pub fn exceed_context(n_prompt_tokens: usize, n_ctx: u32) -> Self {
        let mut error = Self::new(
            StatusCode::BAD_REQUEST,
            "exceed_context_size_error",
            format!(
                "request ({n_prompt_tokens} tokens) exceeds the available context size \
                 ({n_ctx} tokens), try increasing it"
            ),
        );
        error
            .extra
            .insert("n_prompt_tokens".into(), json!(n_prompt_tokens));
        error.extra.insert("n_ctx".into(), json!(n_ctx));
        error
    }

    /// The `{"error":{...}}` document.
    pub fn to_json(&self) -> Value {
        let mut inner = Map::new();
        inner.insert("code".into(), json!(self.status.as_u16()));
        inner.insert("message".into(), json!(self.message));
        inner.insert("type".into(), json!(self.kind));
        for (k, v) in &self.extra {
            inner.insert(k.clone(), v.clone());
        }
        json!({ "error": inner })
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.kind,
            self.message
        )
    }
}

impl std::error::Error for ApiError {}
