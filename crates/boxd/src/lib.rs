//! boxd, boxmaker's supervisor.
//!
//! It starts llama-server, brokerd and loopd in the order of its [`config`], each once the one
//! before is ready (or with it, when the child has `with_previous`) and only with a config
//! file matching its pinned sha256 ([`pin`]); tells
//! systemd when all are ready ([`notify`]); restarts a child that dies, with backoff, and gives
//! up when one dies too often; and on SIGTERM or SIGINT stops them in reverse order
//! ([`supervisor`], [`daemon`]). Its children die with it, however it dies ([`exec_child`]),
//! and what they leave is killed ([`process`], [`leftovers`]); a child counts as ready only
//! when what answers is that child ([`ready`], [`procs`]). Its [`metrics`] (each child up,
//! restarts, last exit, uptime) are served on its optional socket ([`server`]) and TCP
//! listener (`[metrics] listen`).

pub mod config;
pub mod daemon;
pub mod error;
pub mod exec_child;
pub mod leftovers;
pub mod metrics;
pub mod notify;
pub mod pin;
pub mod process;
pub mod procs;
pub mod ready;
pub mod server;
pub mod supervisor;

pub use error::Error;
