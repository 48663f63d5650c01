//! `[llama]`: how loopd reaches llama-server; `[expect]`: what it must find there.

use bxconfig::Problems;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The prefix of a `llama.url` naming a Unix socket: `unix:/path/to.sock`.
pub const UNIX_URL_PREFIX: &str = "unix:";

/// The URL of the one llama-server when neither `llama.url` nor `[[llama.endpoints]]` is set.
pub const DEFAULT_LLAMA_URL: &str = "http://127.0.0.1:8080";

/// `[llama]`: where the model servers are (one `url`, or `[[llama.endpoints]]`), the timeouts
/// and retry policy every endpoint shares, and how often each is watched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Llama {
    /// Base URL of the one llama-server: `http://host:port`, `https://host[:port]`, or
    /// `unix:/path/to.sock` for a Unix socket (`--host PATH.sock`). Overridden by
    /// `--llama URL`. Unset: [`DEFAULT_LLAMA_URL`], unless `endpoints` are listed (then it
    /// must stay unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// A file holding the API key llama-server was started with (`--api-key-file`); none: no key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_file: Option<PathBuf>,
    /// For an `https` url: a PEM file of the one CA its certificate must chain to; none: the
    /// system's roots.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Several model servers, each with its roles and slots (see `docs/scale-out.md`);
    /// empty: the one `url`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<super::EndpointConfig>,
    /// How often each endpoint's `/health` is asked while loopd runs, in milliseconds.
    pub health_interval_ms: u64,
    /// The longest a TCP connect may take, in milliseconds.
    pub connect_timeout_ms: u64,
    /// The longest one model call (a whole streamed answer) may take, in milliseconds.
    pub request_timeout_ms: u64,
    /// The longest a model call may wait for the next byte (the answer's head, or the next
    /// piece of the stream), in milliseconds; then it fails. A frozen server then holds the
    /// main slot this long, not `request_timeout_ms`.
    pub stall_timeout_ms: u64,
    /// At start, how long to wait while `/health` says `Loading model`, in milliseconds.
    pub health_wait_ms: u64,
    /// How many times one model call is tried in all (1: no retry) on 503 or a refused connect.
    pub retry_max_attempts: u32,
    /// The first wait between tries, in milliseconds; doubled after each try.
    pub retry_initial_backoff_ms: u64,
    /// The longest wait between tries, in milliseconds.
    pub retry_max_backoff_ms: u64,
    /// The most tokens one answer may have (`max_tokens`); an answer cut there ends with
    /// `finish_reason: "length"`, and any tool call in it is not run.
    pub max_answer_tokens: u32,
}

impl Default for Llama {
    fn default() -> Llama {
        Llama {
            url: None,
            api_key_file: None,
            ca_file: None,
            endpoints: Vec::new(),
            health_interval_ms: 5_000,
            connect_timeout_ms: 2_000,
            request_timeout_ms: 600_000,
            stall_timeout_ms: 60_000,
            health_wait_ms: 300_000,
            retry_max_attempts: 5,
            retry_initial_backoff_ms: 250,
            retry_max_backoff_ms: 5_000,
            max_answer_tokens: 2_048,
        }
    }
}

impl Llama {
    /// The one llama-server's URL: `url`, or [`DEFAULT_LLAMA_URL`].
    pub fn url(&self) -> &str {
        self.url.as_deref().unwrap_or(DEFAULT_LLAMA_URL)
    }

    /// Names the endpoints' URLs for a log line or an error: one URL, or `name=url, ...`.
    pub fn describe(&self) -> String {
        if self.endpoints.is_empty() {
            return self.url().to_string();
        }
        self.endpoints
            .iter()
            .map(|e| format!("{}={}", e.name, e.url))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub(super) fn check(&self, p: &mut Problems) {
        p.at_least("llama.health_interval_ms", self.health_interval_ms, 1);
        p.at_least("llama.connect_timeout_ms", self.connect_timeout_ms, 1);
        p.at_least("llama.request_timeout_ms", self.request_timeout_ms, 1);
        p.at_least("llama.stall_timeout_ms", self.stall_timeout_ms, 1);
        p.at_least("llama.retry_max_attempts", self.retry_max_attempts, 1);
        p.at_least("llama.max_answer_tokens", self.max_answer_tokens, 1);
        p.at_least(
            "llama.retry_initial_backoff_ms",
            self.retry_initial_backoff_ms,
            1,
        );
        p.check(
            self.retry_max_backoff_ms >= self.retry_initial_backoff_ms,
            "llama.retry_max_backoff_ms",
            format!(
                "must be at least llama.retry_initial_backoff_ms ({}), is {}",
                self.retry_initial_backoff_ms, self.retry_max_backoff_ms
            ),
        );
    }
}

/// `[expect]`: what llama-server's `/props` must say; loopd refuses to start when a value set
/// here differs. Unset values are not checked.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Expect {
    /// The context size of each slot, in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n_ctx: Option<u32>,
    /// The number of slots (`--parallel`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
    /// The model alias or path `/props` reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Expect {
    pub(super) fn check(&self, p: &mut Problems) {
        if let Some(n_ctx) = self.n_ctx {
            p.at_least("expect.n_ctx", n_ctx, 1);
        }
        if let Some(slots) = self.slots {
            p.at_least("expect.slots", slots, 1);
        }
        if let Some(model) = &self.model {
            p.non_empty("expect.model", model);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url_problems(url: &str) -> Vec<String> {
        let llama = Llama {
            url: Some(url.to_owned()),
            ..Llama::default()
        };
        let mut p = Problems::new();
        super::super::endpoints::check(&llama, &super::super::Slots::default(), None, &mut p);
        p.finish()
            .err()
            .unwrap_or_default()
            .iter()
            .map(|problem| format!("{}: {}", problem.key, problem.message))
            .collect()
    }

    #[test]
    fn config_llama_url_may_name_a_unix_socket() {
        assert_eq!(
            url_problems("unix:/run/boxmaker/llama.sock"),
            Vec::<String>::new()
        );
        assert_eq!(url_problems("http://127.0.0.1:8080"), Vec::<String>::new());
        let empty = url_problems("unix:");
        assert_eq!(empty.len(), 1);
        assert!(empty[0].contains("llama.url"), "{empty:?}");
        let long = format!("unix:/{}", "s".repeat(200));
        assert_eq!(url_problems(&long).len(), 1);
        assert_eq!(url_problems("https://gpu.lan:8443"), Vec::<String>::new());
    }

    #[test]
    fn config_llama_ca_file_is_only_for_https() {
        let problems = |url: &str| {
            let llama = Llama {
                url: Some(url.to_owned()),
                ca_file: Some(PathBuf::from("/etc/boxmaker/lan-ca.pem")),
                ..Llama::default()
            };
            let mut p = Problems::new();
            super::super::endpoints::check(&llama, &super::super::Slots::default(), None, &mut p);
            p.finish().err().unwrap_or_default()
        };
        assert!(problems("https://gpu.lan").is_empty());
        let wrong = problems("http://127.0.0.1:8080");
        assert_eq!(wrong.len(), 1, "{wrong:?}");
        assert_eq!(wrong[0].key, "llama.ca_file");
    }
}
