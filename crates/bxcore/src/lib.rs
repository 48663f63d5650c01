//! boxmaker's core types, shared by every other crate.
//!
//! This crate does no I/O and knows nothing of tokio: it is the vocabulary the daemons speak.
//! Everything that crosses a process boundary or lands on disk is built from these types, so
//! each one validates itself on construction and on deserialisation.

mod approval;
mod deny;
mod error;
mod event;
mod ids;
pub mod json;
mod labels;
mod record;
pub mod sanitize;
mod time;
pub mod visible;

pub use approval::{APPROVAL_ID_MAX_BYTES, ApprovalDecision, ApprovalId};
pub use deny::{DenyReason, denial_message};
pub use error::ValueError;
pub use event::{ModelTimings, TurnEvent};
pub use ids::{CallId, SESSION_ID_MAX_BYTES, SessionId, TASK_ID_MAX_BYTES, TaskId};
pub use labels::{DataClass, Labels};
pub use record::{
    LOG_FORMAT_VERSION, LogRecord, MemoryNote, ToolCall, ToolOutcome, TurnEnd, Usage,
};
pub use time::Timestamp;
