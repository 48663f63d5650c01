//! What came of one tool call ([`CallOutcome`]): its text for the model, its labels, how it
//! ended, and its log record and turn event. Made by `turn` for every call, and by the local
//! tools that run above it (`subagent`).

use bxcore::sanitize::neutralise;
use bxcore::{CallId, DataClass, Labels, LogRecord, Timestamp, ToolOutcome, TurnEvent};

/// What came of one tool call, ready to be logged and shown to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// What the model is shown (capped, neutralised when untrusted).
    pub content: String,
    /// The result's class.
    pub class: DataClass,
    /// Whether the result came from outside.
    pub untrusted: bool,
    /// Whether the content was cut to the cap.
    pub truncated: bool,
    /// How the call ended.
    pub outcome: ToolOutcome,
    /// Whether loopd answered it itself (it never reached the port).
    pub by_loopd: bool,
}

impl CallOutcome {
    /// A public, trusted answer of loopd's own.
    pub(crate) fn local(content: String, outcome: ToolOutcome) -> CallOutcome {
        CallOutcome::local_labelled(content, outcome, Labels::PUBLIC)
    }

    /// An answer of loopd's own whose text came from something labelled `labels` (a listing
    /// of external tools' descriptions, a stored output, a child's answer): neutralised when
    /// untrusted.
    pub(crate) fn local_labelled(
        content: String,
        outcome: ToolOutcome,
        labels: Labels,
    ) -> CallOutcome {
        CallOutcome {
            content: neutralised(content, labels.untrusted),
            class: labels.class,
            untrusted: labels.untrusted,
            truncated: false,
            outcome,
            by_loopd: true,
        }
    }

    /// The label of this outcome.
    pub fn labels(&self) -> Labels {
        Labels::new(self.class, self.untrusted)
    }

    /// A call that was not run, with `why` for the model.
    pub fn not_run(why: &str) -> CallOutcome {
        CallOutcome::local(why.to_string(), ToolOutcome::Failed)
    }

    /// The log record of this outcome for call `call` answering `tool_call_id`.
    pub fn record(&self, call: CallId, tool_call_id: &str) -> LogRecord {
        LogRecord::ToolResult {
            time: Timestamp::now(),
            call,
            tool_call_id: tool_call_id.to_string(),
            content: self.content.clone(),
            class: self.class,
            untrusted: self.untrusted,
            truncated: self.truncated,
            outcome: self.outcome,
            by_loopd: self.by_loopd,
        }
    }

    /// The turn event of this outcome.
    pub fn event(&self, call: CallId) -> TurnEvent {
        TurnEvent::ToolResult {
            call,
            outcome: self.outcome,
            class: self.class,
            untrusted: self.untrusted,
            truncated: self.truncated,
            bytes: self.content.len() as u64,
        }
    }
}

/// `text`, neutralised when it is untrusted.
pub(crate) fn neutralised(text: String, untrusted: bool) -> String {
    if untrusted {
        neutralise(&text).into_owned()
    } else {
        text
    }
}
