//! fakellama: a scripted stand-in for llama.cpp's `llama-server`, speaking the same HTTP API
//! (`/health`, `/props`, `/slots`, `/v1/chat/completions` streamed or not, `/tokenize`,
//! `/apply-template`, slot files by `POST /slots/{id}?action=save|restore|erase`), for tests
//! and benchmarks of the agent loop.
//!
//! It renders each request's messages and tools into a ChatML-like prompt
//! ([`template`] rules), tokenises it deterministically ([`tokenize`]),
//! keeps each slot's cached tokens and reports honest `usage` and `timings` from the
//! longest common prefix, and answers from a [`Script`] of rules.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let script = fakellama::Script::parse("[[rule]]\nreply = \"hi\"\n")?;
//! let server = fakellama::start(fakellama::Options { script, ..Default::default() }).await?;
//! println!("{}", server.url());
//! let seen = server.requests();
//! # let _ = seen;
//! server.shutdown().await;
//! # Ok(()) }
//! ```

mod chat;
mod error;
mod http;
mod model;
mod options;
mod record;
mod reply;
mod request;
mod script;
mod server;
mod slot_actions;
mod slot_files;
mod slots;
mod sse;
mod state;
mod stream_body;
pub mod template;
pub mod tokenize;
mod tokens;
mod usage;

pub use error::{Error, ScriptError};
pub use http::{BOS_TOKEN, MAX_BODY_BYTES, MODEL_FTYPE};
pub use model::{MODEL_ALIAS, MODEL_PATH};
pub use options::{DEFAULT_N_CTX, DEFAULT_SLOTS, Listen, Options, Profile};
pub use record::{MAX_RECORDED_REQUESTS, RecordedRequest};
pub use reply::END_OF_TURN;
pub use script::{FIXED_REPLY, Rule, Script, ScriptHttpError, ScriptStreamError, ScriptToolCall};
pub use server::{Handle, start};
pub use slots::SlotInfo;
pub use sse::BUILD_INFO;
