//! Config loading shared by boxmaker's daemons.
//!
//! A daemon's config is built from layers, lowest first: the serde defaults of its config
//! struct, its TOML file, environment overrides `PREFIX_SECTION__KEY=value` (`LOOPD_LLAMA__URL`
//! sets `llama.url`; the part after the prefix is split on `__` and lowercased), and
//! command-line flags. Every config struct denies unknown keys. Every error names where the
//! bad value came from (the file, the environment variable or the flag), the key, and why:
//!
//! ```text
//! config/loopd.toml: key "llama.request_timeout_ms": invalid type: found string "x", expected u64
//! ```
//!
//! [`Validate`] adds the checks types cannot express; [`run_check_config`] is the shared
//! `--check-config FILE` behaviour. See `docs/config.md`.

mod check;
mod cli;
mod daemon;
mod env;
mod error;
mod load;
mod log;
mod lossy;
mod validate;

pub use check::{CheckOutcome, NOTE_PREFIX, WARNING_PREFIX, check_config, run_check_config};
pub use cli::ConfigArgs;
pub use daemon::{Daemon, EXIT_FAILED, EXIT_NO_CONFIG, run_daemon};
pub use error::{ConfigError, KeyProblem, Origin};
pub use load::{Loader, load, load_from};
pub use log::{
    JOURNAL_STREAM_ENV, LogConfig, LogLevel, every_target, init_log, is_journal_stream,
    split_log_line, stderr_is_journal,
};
pub use lossy::{Lossy, lossy_stderr};
pub use validate::{MAX_SOCKET_PATH_BYTES, Problem, Problems, Validate, check_http_url};
