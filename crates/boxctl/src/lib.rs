//! `boxctl`: how a person (or a script) drives boxmaker, through loopd's Unix socket.
//!
//! The library holds everything but `main`: the command line ([`cli`]), a client of loopd's
//! API ([`client`], its errors in [`error`], its limits in [`limits`], event streams in
//! [`stream`] with an SSE reader in [`sse`]), how events, records and answers read as
//! text ([`mod@format`], [`listing`], [`answers`], [`approvals`], [`schedules`],
//! [`usage`]), whether to style it ([`colour`]: `NO_COLOR`), the inline
//! `[y/N]` question for a call waiting for the owner ([`prompt`]; `boxctl chat`'s line editor
//! and history at a terminal in [`line_editor`]), and the commands themselves
//! ([`mod@run`]: `task`, `chat`, errors as JSON, man pages). See `boxctl --help` for the exit
//! codes.

pub mod answers;
pub mod approvals;
pub mod cli;
pub mod client;
pub mod colour;
pub mod error;
pub mod format;
pub mod limits;
pub mod line_editor;
pub mod listing;
pub mod prompt;
pub mod records;
pub mod run;
pub mod safe_text;
pub mod schedules;
pub mod sse;
pub mod stream;
pub mod table;
pub mod usage;

pub use cli::Cli;
pub use client::{Client, ClientError};
pub use run::run;
