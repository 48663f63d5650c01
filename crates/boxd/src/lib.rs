//! boxd, boxmaker's supervisor.
//!
//! It starts llama-server, brokerd and loopd in the order of its [`config`], each once the one
//! before is ready and only with a config file matching its pinned sha256 ([`pin`]); tells
//! systemd when all are ready ([`notify`]); restarts a child that dies, with backoff, and gives
//! up when one dies too often; and on SIGTERM or SIGINT stops them in reverse order
//! ([`supervisor`], [`daemon`]).

pub mod config;
pub mod daemon;
pub mod error;
pub mod notify;
pub mod pin;
pub mod process;
pub mod ready;
pub mod supervisor;

pub use error::Error;
