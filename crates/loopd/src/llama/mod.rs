//! The llama-server client: chat completions (streamed), retries, and the start-up checks
//! against `/health` and `/props`, over http, https (certificates checked) or a Unix socket;
//! what went wrong with the endpoint is kept in [`Faults`].
//!
//! Nothing in this module logs a prompt or an answer's text (request bodies, message
//! contents), at any level.
//!
//! The client is async only, over hyper. Turns run on their own threads (see `turn`) and wait
//! for its calls through `blocking::Blocking`.

mod client;
mod endpoint;
mod error;
mod faults;
mod kept;
mod measure;
mod message;
mod options;
mod props;
mod quickack;
mod retry;
mod slot_files;
mod sse;
mod stream;
#[cfg(test)]
pub(crate) mod tests;
mod tls;
mod transport;
mod wire;

pub use client::{Client, ClientOptions};
pub use error::InferError;
pub use faults::{FaultState, Faults};
pub use message::{ChatEvent, ChatMessage, ChatRequest, Completion, Timings};
pub use props::{ServerInfo, check_expectations};
pub use proto::ToolSchema;
pub use slot_files::{Restored, SLOT_FILE_TIMEOUT_MS, Saved};
pub use tls::TlsOptions;

pub use client::{HEALTH_POLL_INTERVAL_MS, PROBE_TIMEOUT_MS};
pub use endpoint::Endpoint;
pub use props::Health;

/// llama-server's `finish_reason` for an answer cut at the token limit or the context ceiling.
pub const FINISH_LENGTH: &str = "length";
