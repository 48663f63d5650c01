//! Fake tools: an in-process port that answers `clock` and `echo` and records every request.

use super::{CLOCK, ECHO, ToolPort};
use bxcore::{DataClass, DenyReason};
use proto::{ToolRequest, ToolResponse};
use serde_json::Value;
use std::sync::Mutex;

/// What loopd says when it answers tools itself.
pub const FAKE_TOOLS_NOTE: &str = "no broker configured: tools are answered by loopd's \
     built-in fake tools (clock, echo); set [broker] socket to use brokerd";

/// In-process tools that stand in for brokerd: `clock` and `echo` answer, every other tool is
/// refused with `NoGrant`, and every request is recorded for tests to inspect.
#[derive(Debug, Default)]
pub struct FakeTools {
    calls: Mutex<Vec<ToolRequest>>,
}

impl FakeTools {
    /// Fake tools that have seen no call yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every request so far, oldest first.
    pub fn calls(&self) -> Vec<ToolRequest> {
        // A panic elsewhere while holding the lock leaves the list intact: keep using it.
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl ToolPort for FakeTools {
    fn call(&self, request: &ToolRequest) -> ToolResponse {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(request.clone());
        match request.tool.as_str() {
            CLOCK => public_result(bxcore::Timestamp::now().to_rfc3339()),
            ECHO => match serde_json::from_str::<Value>(&request.arguments) {
                Ok(Value::Object(args)) => match args.get("text") {
                    Some(Value::String(text)) => public_result(text.clone()),
                    _ => echo_failed(),
                },
                _ => echo_failed(),
            },
            _ => ToolResponse::denied(DenyReason::NoGrant, None),
        }
    }
}

fn public_result(content: String) -> ToolResponse {
    ToolResponse::Result {
        content,
        class: DataClass::Public,
        untrusted: false,
        truncated: false,
    }
}

fn echo_failed() -> ToolResponse {
    ToolResponse::failed("echo needs a JSON object with a string \"text\".")
}
