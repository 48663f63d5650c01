//! A turn's events folded into the one message the room gets when the turn ends: a line per
//! tool call, then the answer, or, for an answer labelled above `matrix.max_class`, where on
//! the box to read it instead. The answer is sent whole at the end, never streamed: until the
//! turn ends its label is not known, and text above the room's class must not leave the box.

use boxctl::safe_text::{one_line, terminal_safe};
use bxcore::{DataClass, Labels, SessionId, TurnEnd, TurnEvent};

/// The longest message body posted, in bytes (a Matrix event may be 64 KiB in all); a longer
/// answer is posted cut, and whole as a file.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;
/// The name of the file a long answer is attached as.
pub const ANSWER_FILE: &str = "answer.txt";
/// The largest answer attached as a file, in bytes; past it the file is cut too.
pub const MAX_FILE_BYTES: usize = 4 * 1024 * 1024;

/// What the room gets: a message, and the whole answer as a file when the message had to be
/// cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The message's body.
    pub text: String,
    /// The whole text, to attach as [`ANSWER_FILE`].
    pub file: Option<String>,
}
/// How much of a tool call's arguments its line shows, in characters.
const CALL_LINE_CHARS: usize = 80;

/// What a turn said, as its events came.
#[derive(Debug, Default)]
pub struct Reply {
    calls: Vec<String>,
    answer: String,
    turn: Option<u64>,
    end: Option<(TurnEnd, Labels)>,
}

impl Reply {
    /// Takes one event of the turn (a subagent's are its own business).
    pub fn take(&mut self, event: &TurnEvent) {
        match event {
            TurnEvent::Content { text } => self.answer.push_str(text),
            TurnEvent::ToolCall { tool_call, .. } => self.calls.push(format!(
                "⚙ {}({})",
                one_line(&tool_call.name, Some(CALL_LINE_CHARS)),
                one_line(&tool_call.arguments, Some(CALL_LINE_CHARS))
            )),
            TurnEvent::Started { turn, .. } => self.turn = Some(*turn),
            TurnEvent::Ended { turn, end, context } => {
                self.turn = Some(*turn);
                self.end = Some((end.clone(), *context));
            }
            _ => {}
        }
    }

    /// Whether the turn has ended.
    pub fn ended(&self) -> bool {
        self.end.is_some()
    }

    /// The turn's number, once an event said it.
    pub fn turn(&self) -> Option<u64> {
        self.turn
    }

    /// Whether any call or text came.
    pub fn has_body(&self) -> bool {
        !self.calls.is_empty() || !self.answer.trim().is_empty()
    }

    /// This reply's calls and text with `other`'s end: a turn read back from the log, ended
    /// as the stream said.
    pub fn ended_as(mut self, other: &Reply) -> Reply {
        self.turn = other.turn;
        self.end = other.end.clone();
        self
    }

    /// The message for the room, for a turn of `session` in a room that may see up to
    /// `max_class`. A turn whose stream broke before its end says so.
    pub fn message(&self, session: &SessionId, max_class: DataClass) -> String {
        self.outgoing(session, max_class).text
    }

    /// [`Reply::message`], and the whole answer as a file when the message is cut.
    pub fn outgoing(&self, session: &SessionId, max_class: DataClass) -> Outgoing {
        let Some((end, labels)) = &self.end else {
            return Outgoing::text(format!(
                "The box lost track of this task before it ended; see `boxctl show {session}`."
            ));
        };
        if labels.class > max_class {
            return Outgoing::text(format!(
                "The answer is labelled {} (it was made from {} data), above what this room may \
                 see ({}); read it on the box: `boxctl show {session}`.",
                class_name(labels.class),
                class_name(labels.class),
                class_name(max_class)
            ));
        }
        let mut lines = self.calls.clone();
        let answer = terminal_safe(self.answer.trim()).into_owned();
        if !answer.is_empty() {
            lines.push(answer);
        }
        if let Some(note) = end_note(end) {
            lines.push(note);
        }
        if labels.untrusted {
            lines.push("(made with untrusted data)".into());
        }
        let whole = lines.join("\n");
        if whole.len() <= MAX_MESSAGE_BYTES {
            return Outgoing::text(whole);
        }
        let note = format!("\n… (cut; the whole answer is attached as {ANSWER_FILE})");
        Outgoing {
            text: format!("{}{note}", cut(&whole, MAX_MESSAGE_BYTES - note.len())),
            file: Some(cut(&whole, MAX_FILE_BYTES)),
        }
    }
}

/// A line for a turn that did not end with an answer.
fn end_note(end: &TurnEnd) -> Option<String> {
    match end {
        TurnEnd::Done => None,
        TurnEnd::Cancelled => Some("(cancelled)".into()),
        TurnEnd::Failed { reason } => Some(format!("(failed: {})", one_line(reason, Some(200)))),
        TurnEnd::MaxSteps => Some("(stopped at the step limit)".into()),
        TurnEnd::Interrupted => Some("(interrupted: loopd stopped while it ran)".into()),
        TurnEnd::Budget { message, .. } => Some(format!("(stopped: {message})")),
    }
}

fn class_name(class: DataClass) -> &'static str {
    match class {
        DataClass::Public => "public",
        DataClass::Internal => "internal",
        DataClass::Private => "private",
        DataClass::Secret => "secret",
    }
}

impl Outgoing {
    fn text(text: String) -> Outgoing {
        Outgoing { text, file: None }
    }
}

/// `text` cut to at most `max_bytes` on a character boundary.
pub(crate) fn cut(text: &str, max_bytes: usize) -> String {
    let mut end = text.len().min(max_bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

#[cfg(test)]
mod tests;
