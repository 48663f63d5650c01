//! How to run the server: where to listen, slots, context, key, delays, model, slot files,
//! script.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

use crate::model::MODEL_PATH;
use crate::script::Script;

/// Tokens of context per slot unless told otherwise.
pub const DEFAULT_N_CTX: u32 = 8192;
/// Slots unless told otherwise.
pub const DEFAULT_SLOTS: u32 = 3;

/// Where the server listens (and, once started, where it is bound).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A TCP address; port 0 picks a free port.
    Tcp(SocketAddr),
    /// A Unix socket path.
    Unix(PathBuf),
}

impl FromStr for Listen {
    type Err = std::convert::Infallible;

    /// `HOST:PORT` is TCP (`localhost:PORT` means `127.0.0.1:PORT`); anything containing
    /// `/` or not parsing as a socket address is a Unix socket path.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if !s.contains('/') {
            if let Ok(addr) = s.parse::<SocketAddr>() {
                return Ok(Listen::Tcp(addr));
            }
            if let Some(port) = s
                .strip_prefix("localhost:")
                .and_then(|p| p.parse::<u16>().ok())
            {
                return Ok(Listen::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, port))));
            }
        }
        Ok(Listen::Unix(PathBuf::from(s)))
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Tcp(addr) => write!(f, "{addr}"),
            Listen::Unix(path) => write!(f, "{}", path.display()),
        }
    }
}

/// The longest a chat request waits for [`Options::hold_until_busy`] slots to be busy at
/// once before it answers anyway, in milliseconds.
pub const HOLD_UNTIL_BUSY_MAX_MS: u64 = 30_000;

/// Everything [`crate::start`] needs.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where to listen.
    pub listen: Listen,
    /// Tokens of context per slot.
    pub n_ctx: u32,
    /// Number of slots (at least 1 is used).
    pub slots: u32,
    /// When set, every endpoint but `/health` needs this key.
    pub api_key: Option<String>,
    /// Delay per streamed chunk, or before a non-streamed answer, in milliseconds.
    pub delay_ms: u64,
    /// When set, a chat request that holds its slot waits until this many slots have been
    /// busy at once (at most [`HOLD_UNTIL_BUSY_MAX_MS`]) before it answers: a test can see
    /// whether a client keeps that many calls in flight without timing anything.
    pub hold_until_busy: Option<usize>,
    /// For this long after start every endpoint answers 503 "Loading model", in milliseconds.
    pub loading_ms: u64,
    /// Whether the "model's" chat template supports tools (as Qwen2.5's does, SmolLM2's does
    /// not). Off: `tools` in requests are ignored (not rendered into the prompt), scripted
    /// tool calls come back as their JSON text in `content`, and `/props` says
    /// `chat_template_caps.supports_tools: false`.
    pub tool_template: bool,
    /// The model path the server pretends to serve (llama-server's `--model`): `/props`
    /// `model_path` and `model_alias` (llama-server without `--alias`), the `/v1/models` id,
    /// every answer's `model`, and the model recorded in slot files (a file from another
    /// model is refused on restore). Default [`MODEL_PATH`].
    pub model_path: String,
    /// Where `POST /slots/{id}?action=save|restore` keep slot files (llama-server's
    /// `--slot-save-path`); it must be an existing directory. `None`: slot actions answer
    /// 501 `not_supported_error`.
    pub slot_save_path: Option<PathBuf>,
    /// How to answer chat requests.
    pub script: Script,
    /// How fast the "model" is said to be, and how slow its slot files.
    pub profile: Profile,
}

/// The speeds fakellama reports and keeps to: its prompt evaluation, as `timings` say it, and
/// the time each slot save and restore takes, per token moved. The default is a small model on
/// two CPU cores with files on a fast disk; [`Profile::gpu`] is a GPU's: prefill faster than
/// moving the same tokens through a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// Prompt evaluation, microseconds per evaluated token (reported in `timings.prompt_ms`).
    pub prompt_us_per_token: u64,
    /// The time a slot save or restore takes, microseconds per token in the file (slept
    /// before it answers).
    pub slot_file_us_per_token: u64,
    /// Generation, microseconds per generated token (reported in `timings.predicted_ms`).
    pub predicted_us_per_token: u64,
    /// Whether a chat request also takes the times it reports: the prefill before its first
    /// chunk, and each token's generation before its chunk (each slot on its own, as a GPU's
    /// slots run together). Off: it answers as fast as it can.
    pub real_time: bool,
}

impl Default for Profile {
    /// 4,000 prompt tokens a second; slot files as fast as the disk.
    fn default() -> Self {
        Self {
            prompt_us_per_token: crate::usage::PROMPT_US_PER_TOKEN,
            slot_file_us_per_token: 0,
            predicted_us_per_token: crate::usage::PREDICTED_US_PER_TOKEN,
            real_time: false,
        }
    }
}

impl Profile {
    /// A GPU's, from the project's H200 figures (`docs/PERFORMANCE.md`): 342 tokens prefilled
    /// in 2.4 ms (7 µs a token), an 11 MB slot file of ~360 tokens saved in 8-9 ms and restored
    /// in 3.6-3.8 ms (about 24 µs and 10 µs a token; one figure for both here: 17), 32 tokens
    /// generated in 43 ms (1.3 ms a token); kept in real time.
    pub fn gpu() -> Self {
        Self {
            prompt_us_per_token: 7,
            slot_file_us_per_token: 17,
            predicted_us_per_token: 1_300,
            real_time: true,
        }
    }
}

impl Default for Options {
    /// `127.0.0.1:0`, [`DEFAULT_N_CTX`], [`DEFAULT_SLOTS`], no key, no delays, a template
    /// with tool support, [`MODEL_PATH`], no slot files, the fixed reply.
    fn default() -> Self {
        Self {
            listen: Listen::Tcp(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))),
            n_ctx: DEFAULT_N_CTX,
            slots: DEFAULT_SLOTS,
            api_key: None,
            delay_ms: 0,
            hold_until_busy: None,
            loading_ms: 0,
            tool_template: true,
            model_path: MODEL_PATH.to_owned(),
            slot_save_path: None,
            script: Script::default(),
            profile: Profile::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_listen() {
        assert_eq!(
            "127.0.0.1:80".parse::<Listen>().unwrap(),
            Listen::Tcp("127.0.0.1:80".parse().unwrap())
        );
        assert_eq!(
            "localhost:81".parse::<Listen>().unwrap(),
            Listen::Tcp("127.0.0.1:81".parse().unwrap())
        );
        assert_eq!(
            "/run/x.sock".parse::<Listen>().unwrap(),
            Listen::Unix("/run/x.sock".into())
        );
        assert_eq!(
            "x.sock".parse::<Listen>().unwrap(),
            Listen::Unix("x.sock".into())
        );
    }
}
