//! How memory notes, notifications and a session's summaries read as text: one line each, with
//! labels; and what a compaction asked for did.

pub use crate::format::label_words;
use crate::format::{one_line, terminal_safe};
use bxcore::{LogRecord, MemoryNote};
use proto::api::CompactAnswer;

/// The most characters of a note, summary or carry on one line.
pub const LINE_TEXT_MAX_CHARS: usize = 200;

/// What a compaction did, as one line: the new epoch, the carry's size, and whether the
/// model wrote it (and why not).
pub fn compact_line(answer: &CompactAnswer) -> String {
    let mut line = format!(
        "{}: epoch {} began; its carry has {} characters",
        terminal_safe(answer.session.as_str()),
        answer.epoch,
        answer.carry_chars
    );
    match &answer.model_failure {
        Some(why) => line.push_str(&format!(
            ", kept without the model ({})",
            one_line(why, Some(LINE_TEXT_MAX_CHARS))
        )),
        None => {
            let s = if answer.notes == 1 { "" } else { "s" };
            line.push_str(&format!(
                ", written by the model; {} memory note{s} stored",
                answer.notes
            ));
        }
    }
    line
}

/// A memory note as one line: `TIME SESSION [LABELS] TEXT`.
pub fn memory_line(note: &MemoryNote) -> String {
    format!(
        "{} {} [{}] {}",
        note.time.to_rfc3339(),
        terminal_safe(note.session.as_str()),
        label_words(note.class, note.untrusted),
        one_line(&note.text, Some(LINE_TEXT_MAX_CHARS))
    )
}

/// A heartbeat notification as one line: `TIME SESSION#TURN [LABELS] TEXT`.
pub fn notification_line(notification: &proto::api::Notification) -> String {
    format!(
        "{} {}#{} [{}] {}",
        notification.time.to_rfc3339(),
        terminal_safe(notification.session.as_str()),
        notification.turn,
        label_words(notification.class, notification.untrusted),
        one_line(&notification.text, Some(LINE_TEXT_MAX_CHARS))
    )
}

/// The line naming `parent`'s child sessions (subagents, `sub-<parent>-<n>`), if it has any.
pub fn children_line(parent: &bxcore::SessionId, list: &proto::api::SessionList) -> Option<String> {
    let prefix = format!("sub-{parent}-");
    let children: Vec<&str> = list
        .sessions
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| {
            id.strip_prefix(&prefix)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    (!children.is_empty()).then(|| format!("child sessions: {}", children.join(", ")))
}

/// Whether a record is a tool summary or an epoch's carry.
pub fn is_summary(record: &LogRecord) -> bool {
    matches!(
        record,
        LogRecord::ToolSummary { .. } | LogRecord::EpochStart { .. }
    )
}

/// A tool summary or an epoch's carry as one line, with its labels; `None` for other records.
pub fn summary_line(record: &LogRecord) -> Option<String> {
    let (what, text, class, untrusted) = match record {
        LogRecord::ToolSummary {
            call,
            content,
            class,
            untrusted,
            ..
        } => (
            format!("summary of call {}", call.0),
            content,
            class,
            untrusted,
        ),
        LogRecord::EpochStart {
            epoch,
            carry,
            class,
            untrusted,
            ..
        } => (format!("carry of epoch {epoch}"), carry, class, untrusted),
        _ => return None,
    };
    Some(format!(
        "{what} [{}] {}",
        label_words(*class, *untrusted),
        one_line(text, Some(LINE_TEXT_MAX_CHARS))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bxcore::{CallId, DataClass, SessionId, Timestamp};

    #[test]
    fn a_sessions_children_are_named_and_others_are_not() {
        let info = |id: &str| proto::api::SessionInfo {
            id: SessionId::new(id).unwrap(),
            last_turn: 1,
            records: 4,
            busy: false,
            queued: 0,
        };
        let list = proto::api::SessionList {
            sessions: [
                "main",
                "sub-main-1",
                "sub-main-3",
                "sub-main-x",
                "sub-mainly-2",
                "sub-sub-main-1-1",
            ]
            .into_iter()
            .map(info)
            .collect(),
        };
        let main = SessionId::new("main").unwrap();
        assert_eq!(
            children_line(&main, &list).as_deref(),
            Some("child sessions: sub-main-1, sub-main-3")
        );
        assert_eq!(
            children_line(&SessionId::new("other").unwrap(), &list),
            None
        );
    }

    #[test]
    fn summaries_and_carries_read_with_their_labels() {
        let time = Timestamp::now();
        let summary = LogRecord::ToolSummary {
            time,
            call: CallId(3),
            tool_call_id: "a".into(),
            content: "otters\neat fish".into(),
            class: DataClass::Private,
            untrusted: true,
        };
        assert_eq!(
            summary_line(&summary).as_deref(),
            Some("summary of call 3 [private, untrusted] otters ⏎ eat fish")
        );
        let carry = LogRecord::EpochStart {
            time,
            epoch: 2,
            carry: "so far".into(),
            class: DataClass::Public,
            untrusted: false,
        };
        assert_eq!(
            summary_line(&carry).as_deref(),
            Some("carry of epoch 2 [public] so far")
        );
        let note = LogRecord::Note {
            time,
            text: "x".into(),
        };
        assert_eq!(summary_line(&note), None);
    }
}
