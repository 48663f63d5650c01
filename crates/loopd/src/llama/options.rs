//! The client's settings, from `[llama]` (and the API key file it names).

use std::fmt;
use std::path::Path;

use super::endpoint::Endpoint;
use super::error::InferError;
use crate::config::Llama;

/// How the client reaches llama-server and how it retries.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// Where llama-server listens.
    pub endpoint: Endpoint,
    /// The API key sent as `Authorization: Bearer KEY`; `None`: no key.
    pub api_key: Option<String>,
    /// The longest a connect may take, in milliseconds.
    pub connect_timeout_ms: u64,
    /// The longest one try of a model call (the whole streamed answer) may take, in
    /// milliseconds.
    pub request_timeout_ms: u64,
    /// The longest one try of a model call may wait for its next byte, in milliseconds.
    pub stall_timeout_ms: u64,
    /// Tries of one model call in all, on 503 or a connection error (1: no retry).
    pub retry_max_attempts: u32,
    /// The first wait between tries, in milliseconds; doubled after each try.
    pub retry_initial_backoff_ms: u64,
    /// The longest wait between tries, in milliseconds.
    pub retry_max_backoff_ms: u64,
    /// `max_tokens` sent with each chat request; `None`: the server's limit (the context).
    pub max_tokens: Option<u32>,
}

impl ClientOptions {
    /// The options `[llama]` describes, reading the API key from `api_key_file` when set
    /// (its content without surrounding whitespace). A missing, unreadable or empty key file
    /// is [`InferError::BadConfig`] naming the file.
    pub fn from_config(llama: &Llama) -> Result<ClientOptions, InferError> {
        let api_key = match &llama.api_key_file {
            Some(path) => Some(read_key(path)?),
            None => None,
        };
        Ok(ClientOptions {
            endpoint: Endpoint::parse(&llama.url)?,
            api_key,
            connect_timeout_ms: llama.connect_timeout_ms,
            request_timeout_ms: llama.request_timeout_ms,
            stall_timeout_ms: llama.stall_timeout_ms,
            retry_max_attempts: llama.retry_max_attempts.max(1),
            retry_initial_backoff_ms: llama.retry_initial_backoff_ms,
            retry_max_backoff_ms: llama.retry_max_backoff_ms,
            max_tokens: Some(llama.max_answer_tokens),
        })
    }

    /// The default `[llama]` settings with another URL (handy in tests).
    pub fn for_url(url: &str) -> Result<ClientOptions, InferError> {
        ClientOptions::from_config(&Llama {
            url: url.to_owned(),
            ..Llama::default()
        })
    }
}

fn read_key(path: &Path) -> Result<String, InferError> {
    let text = std::fs::read_to_string(path).map_err(|e| InferError::BadConfig {
        message: format!("cannot read llama.api_key_file {}: {e}", path.display()),
    })?;
    let key = text.trim();
    if key.is_empty() {
        return Err(InferError::BadConfig {
            message: format!("llama.api_key_file {} is empty", path.display()),
        });
    }
    if key.contains(['\n', '\r']) {
        return Err(InferError::BadConfig {
            message: format!(
                "llama.api_key_file {} must hold the key on one line",
                path.display()
            ),
        });
    }
    Ok(key.to_owned())
}

impl fmt::Debug for ClientOptions {
    /// Like a derived `Debug`, with the API key left out.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientOptions")
            .field("endpoint", &self.endpoint)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("stall_timeout_ms", &self.stall_timeout_ms)
            .field("retry_max_attempts", &self.retry_max_attempts)
            .field("retry_initial_backoff_ms", &self.retry_initial_backoff_ms)
            .field("retry_max_backoff_ms", &self.retry_max_backoff_ms)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::io::Write;

    #[test]
    fn llama_options_read_the_key_file() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"  sekrit\n").unwrap();
        let llama = Llama {
            api_key_file: Some(f.path().to_path_buf()),
            ..Llama::default()
        };
        let options = ClientOptions::from_config(&llama).unwrap();
        assert_eq!(options.api_key.as_deref(), Some("sekrit"));
        assert!(!format!("{options:?}").contains("sekrit"));
        assert_eq!(
            options.retry_max_attempts,
            Llama::default().retry_max_attempts
        );
    }

    #[test]
    fn llama_options_refuse_a_missing_or_empty_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.key");
        let llama = Llama {
            api_key_file: Some(missing.clone()),
            ..Llama::default()
        };
        let e = ClientOptions::from_config(&llama).unwrap_err();
        assert!(matches!(e, InferError::BadConfig { .. }));
        assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        );
        let empty = dir.path().join("empty.key");
        std::fs::write(&empty, "\n").unwrap();
        let llama = Llama {
            api_key_file: Some(empty),
            ..Llama::default()
        };
        let e = ClientOptions::from_config(&llama).unwrap_err();
        assert!(e.to_string().contains("is empty"), "{e}");
    }
}
