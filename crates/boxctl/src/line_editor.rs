//! `boxctl chat` at a terminal: its messages read with line editing and history, its inline
//! answers read as plain lines, by one reader that reads only what it is asked for.
//!
//! A line editor puts the terminal in raw mode and owns its input while it waits; a reader
//! that read stdin ahead would steal the bytes typed at it, and output written while it waits
//! garbles the line. So at a terminal stdin is read on demand, one line per request, by one
//! thread ([`TerminalReads`]): the editor ([`rustyline`]) only when the chat waits for a
//! message (no turn runs, so nothing else writes), a plain cooked-mode line for an inline
//! `[y/N]` question (a turn streams meanwhile). A question dropped while its read is still
//! pending leaves that read behind: the next message is taken from it (plain, no editing for
//! that one line) instead of starting the editor, so no byte is lost and two readers never
//! wait at once. [`Reads`] holds that rule and does no I/O.
//!
//! The history lives in memory for the chat's lifetime only, never in a file: the owner's
//! messages are private data (a task may hold anything the owner typed), and a file would
//! keep them after the chat, readable by whatever reads the owner's files.

use rustyline::error::ReadlineError;
use rustyline::{Config, DefaultEditor};
use std::io::{self, BufRead, Write};
use std::sync::mpsc;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

/// The most messages one chat's history keeps (the oldest go first).
pub const MAX_CHAT_HISTORY_LINES: usize = 1000;

/// A read asked of the terminal's one reader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// One plain line, in the terminal's own (cooked) mode: an answer to a question.
    Plain,
    /// One message, with line editing and history, after this prompt.
    Edit(String),
}

/// Which read is pending: one whose line has not been taken yet. No I/O.
#[derive(Debug, Default)]
pub struct Reads {
    pending: bool,
}

impl Reads {
    /// Nothing pending.
    pub fn new() -> Reads {
        Reads::default()
    }

    /// Whether a read is pending, so that the next line taken comes from it.
    pub fn is_pending(&self) -> bool {
        self.pending
    }

    /// A question is asked: a plain read to request, unless one is pending already (its line
    /// answers it).
    pub fn question(&mut self) -> Option<Read> {
        self.request(Read::Plain)
    }

    /// The chat waits for a message: the editor to request with `prompt`, unless a read is
    /// pending (a dropped question's: its line is the message, read plain).
    pub fn message(&mut self, prompt: &str) -> Option<Read> {
        self.request(Read::Edit(prompt.to_string()))
    }

    /// A line (or the end of stdin) was taken: nothing is pending.
    pub fn taken(&mut self) {
        self.pending = false;
    }

    fn request(&mut self, read: Read) -> Option<Read> {
        if self.pending {
            return None;
        }
        self.pending = true;
        Some(read)
    }
}

/// The one reader of a terminal's stdin: a thread that reads one line per request and sends
/// it on the lines' channel; it ends (and the channel with it) at the end of stdin, Ctrl-D
/// or Ctrl-C at the editor, or a failure to read.
pub struct TerminalReads {
    reads: Reads,
    requests: mpsc::Sender<Read>,
}

impl TerminalReads {
    /// Starts the reader thread, which reads nothing until asked; the lines it will read. If
    /// the thread cannot start, stdin reads as ended.
    pub fn start() -> (TerminalReads, UnboundedReceiver<String>) {
        let (requests, asked) = mpsc::channel();
        let (lines, receiver) = unbounded_channel();
        let _ = std::thread::Builder::new()
            .name("boxctl-terminal".into())
            .spawn(move || serve(asked, lines));
        let reads = TerminalReads {
            reads: Reads::new(),
            requests,
        };
        (reads, receiver)
    }

    /// A question is asked: drops what was typed before it (typed for something else), then
    /// asks for a plain line unless a read is pending.
    pub fn question(&mut self) {
        // Not a terminal after all, or gone: nothing typed ahead to drop.
        let _ = rustix::termios::tcflush(io::stdin(), rustix::termios::QueueSelector::IFlush);
        if let Some(read) = self.reads.question() {
            self.send(read);
        }
    }

    /// The chat waits for a message: asks for the editor with `prompt`, unless a read is
    /// pending. True when the editor shows the prompt; false when the caller shows it (the
    /// pending read is plain).
    pub fn message(&mut self, prompt: &str) -> bool {
        match self.reads.message(prompt) {
            Some(read) => {
                self.send(read);
                true
            }
            None => false,
        }
    }

    /// A line (or the end) was taken from the lines' channel.
    pub fn taken(&mut self) {
        self.reads.taken();
    }

    fn send(&mut self, read: Read) {
        // The thread is gone only once stdin ended: the channel says so to the one waiting.
        let _ = self.requests.send(read);
    }
}

/// The reader thread: one line per request, until stdin ends or nobody listens.
fn serve(asked: mpsc::Receiver<Read>, lines: UnboundedSender<String>) {
    let mut editor = None;
    for read in asked {
        let line = match read {
            Read::Plain => plain_line(),
            Read::Edit(prompt) => edited_line(&mut editor, &prompt),
        };
        let Some(line) = line else { break };
        if lines.send(line).is_err() {
            break;
        }
    }
}

/// One line of stdin as the terminal gives it (it echoes and edits it in its cooked mode),
/// without its line end; `None` at the end of stdin or a failure to read.
fn plain_line() -> Option<String> {
    let mut line = String::new();
    match io::stdin().lock().read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            if line.ends_with('\n') {
                line.pop();
                if line.ends_with('\r') {
                    line.pop();
                }
            }
            Some(line)
        }
    }
}

/// The editor, made at its first use and kept for the chat's lifetime (its history too).
fn editor() -> Option<DefaultEditor> {
    let config = Config::builder()
        .max_history_size(MAX_CHAT_HISTORY_LINES)
        .ok()?
        .auto_add_history(false)
        .build();
    DefaultEditor::with_config(config).ok()
}

/// One message read with the editor after `prompt`, added to the history; `None` at Ctrl-D,
/// Ctrl-C, or a failure. Without an editor, a plain line after the prompt on stderr.
fn edited_line(editor_kept: &mut Option<DefaultEditor>, prompt: &str) -> Option<String> {
    if editor_kept.is_none() {
        *editor_kept = editor();
    }
    let Some(editor) = editor_kept.as_mut() else {
        let mut err = io::stderr();
        let _ = err.write_all(prompt.as_bytes()).and_then(|()| err.flush());
        return plain_line();
    };
    match editor.readline(prompt) {
        Ok(line) => {
            if !line.trim().is_empty() {
                // A history that cannot take it only loses the recall of this line.
                let _ = editor.add_history_entry(line.as_str());
            }
            Some(line)
        }
        Err(ReadlineError::Eof | ReadlineError::Interrupted) => None,
        Err(e) => {
            eprintln!("boxctl: cannot read the message ({e}); the chat ends");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_pending_read_the_message_comes_from_the_editor() {
        let mut reads = Reads::new();
        assert_eq!(reads.message("> "), Some(Read::Edit("> ".into())));
        assert!(reads.is_pending());
        reads.taken();
        // The next message: the editor again (its history has the first).
        assert_eq!(reads.message("> "), Some(Read::Edit("> ".into())));
    }

    #[test]
    fn a_question_asks_a_plain_line_once() {
        let mut reads = Reads::new();
        assert_eq!(reads.question(), Some(Read::Plain));
        // Dropped, then asked again before a line came: the pending read answers it.
        assert_eq!(reads.question(), None);
        reads.taken();
        assert_eq!(reads.question(), Some(Read::Plain));
    }

    #[test]
    fn a_dropped_questions_pending_read_gives_the_next_message() {
        let mut reads = Reads::new();
        assert_eq!(reads.question(), Some(Read::Plain));
        // The question was dropped and the turn ended: no editor while the plain read waits.
        assert_eq!(reads.message("> "), None);
        assert!(reads.is_pending());
        // Its line was the message; the one after comes from the editor.
        reads.taken();
        assert_eq!(reads.message("> "), Some(Read::Edit("> ".into())));
    }
}
