//! Session `s1`'s log, as the stub serves it.

use super::{clock_call, time};
use bxcore::{CallId, DataClass, LogRecord, ToolOutcome, TurnEnd};

/// Session `s1`'s records: five, so pages of two take three requests.
pub fn s1_records() -> Vec<LogRecord> {
    let t = time();
    vec![
        LogRecord::User {
            time: t,
            turn: 1,
            content: "what time is it?".into(),
            task_id: None,
        },
        LogRecord::Assistant {
            time: t,
            content: String::new(),
            reasoning: None,
            tool_calls: vec![clock_call()],
            usage: None,
        },
        LogRecord::ToolResult {
            time: t,
            call: CallId(1),
            tool_call_id: "c1".into(),
            content: "12:00".into(),
            class: DataClass::Public,
            untrusted: false,
            truncated: false,
            outcome: ToolOutcome::Ok,
            by_loopd: false,
        },
        LogRecord::Assistant {
            time: t,
            content: "It is noon.".into(),
            reasoning: None,
            tool_calls: vec![],
            usage: None,
        },
        LogRecord::TurnEnd {
            time: t,
            turn: 1,
            end: TurnEnd::Done,
        },
    ]
}
