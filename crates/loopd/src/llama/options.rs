//! The client's settings, from `[llama]` or one endpoint of it (and the API key and CA files
//! they name).

use std::fmt;
use std::path::Path;

use super::endpoint::Endpoint;
use super::error::InferError;
use super::tls::TlsOptions;
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
    /// How the certificate of an `https://` endpoint is checked; `Some` exactly when
    /// `endpoint` is https (a connection to an https endpoint without it fails as
    /// [`InferError::BadConfig`]).
    pub tls: Option<TlsOptions>,
}

impl ClientOptions {
    /// The options `[llama]` describes: its `url`, `api_key_file` and `ca_file`, as
    /// [`ClientOptions::for_endpoint`] with the setting path `llama`.
    pub fn from_config(llama: &Llama) -> Result<ClientOptions, InferError> {
        ClientOptions::for_endpoint(
            llama,
            "llama",
            llama.url(),
            llama.api_key_file.as_deref(),
            llama.ca_file.as_deref(),
        )
    }

    /// One endpoint's options: `url`, the API key read from `api_key_file` when set (its
    /// content without surrounding whitespace), for https the certificate check (only the CA
    /// of `ca_file` when set, else the system's roots); timeouts, retries and the answer
    /// limit from `llama`. Errors are [`InferError::BadConfig`] naming the setting under
    /// `what` (e.g. `llama.endpoints[1] (cupboard).api_key_file`) and the file: a bad URL, a
    /// missing, unreadable or empty key file, a bad CA file, or a CA file for a URL that is
    /// not https.
    pub fn for_endpoint(
        llama: &Llama,
        what: &str,
        url: &str,
        api_key_file: Option<&Path>,
        ca_file: Option<&Path>,
    ) -> Result<ClientOptions, InferError> {
        let endpoint = Endpoint::parse_setting(&format!("{what}.url"), url)?;
        let api_key = match api_key_file {
            Some(path) => Some(read_key(&format!("{what}.api_key_file"), path)?),
            None => None,
        };
        let tls = match (endpoint.is_tls(), ca_file) {
            (true, Some(path)) => Some(TlsOptions::ca_file(&format!("{what}.ca_file"), path)?),
            (true, None) => Some(TlsOptions::system_roots()?),
            (false, Some(path)) => {
                return Err(InferError::BadConfig {
                    message: format!(
                        "{what}.ca_file {} is set but {what}.url {url:?} is not https://",
                        path.display()
                    ),
                });
            }
            (false, None) => None,
        };
        Ok(ClientOptions {
            endpoint,
            api_key,
            connect_timeout_ms: llama.connect_timeout_ms,
            request_timeout_ms: llama.request_timeout_ms,
            stall_timeout_ms: llama.stall_timeout_ms,
            retry_max_attempts: llama.retry_max_attempts.max(1),
            retry_initial_backoff_ms: llama.retry_initial_backoff_ms,
            retry_max_backoff_ms: llama.retry_max_backoff_ms,
            max_tokens: Some(llama.max_answer_tokens),
            tls,
        })
    }

    /// The default `[llama]` settings with another URL (handy in tests); an https URL trusts
    /// the system's roots.
    pub fn for_url(url: &str) -> Result<ClientOptions, InferError> {
        ClientOptions::for_endpoint(&Llama::default(), "llama", url, None, None)
    }
}

/// The key in the file `path`, named by the setting `key` in errors.
fn read_key(setting: &str, path: &Path) -> Result<String, InferError> {
    let text = std::fs::read_to_string(path).map_err(|e| InferError::BadConfig {
        message: format!("cannot read {setting} {}: {e}", path.display()),
    })?;
    let key = text.trim();
    if key.is_empty() {
        return Err(InferError::BadConfig {
            message: format!("{setting} {} is empty", path.display()),
        });
    }
    if key.contains(['\n', '\r']) {
        return Err(InferError::BadConfig {
            message: format!("{setting} {} must hold the key on one line", path.display()),
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
            .field("tls", &self.tls)
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
