//! Records the session benchmarks fill their logs with.

use bxcore::{CallId, DataClass, LogRecord, Timestamp, ToolOutcome};

/// A tool result of a typical short length, call `n`.
pub fn tool_result(n: u64) -> LogRecord {
    LogRecord::ToolResult {
        time: Timestamp::now(),
        call: CallId(n),
        tool_call_id: format!("call{n}"),
        content: "a tool result of a typical short length, about one line of text".into(),
        class: DataClass::Internal,
        untrusted: false,
        truncated: false,
        outcome: ToolOutcome::Ok,
        by_loopd: false,
    }
}
