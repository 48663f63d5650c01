//! The inline `[y/N]` question `boxctl task`, `boxctl show --follow` and `boxctl chat` ask
//! when a call waits for the owner's approval.
//!
//! [`Prompter`] decides, from the turn's events and the lines typed, what to ask and what to
//! answer; it does no I/O, so tests drive it with any events and lines. [`Prompt`] carries its
//! decisions out: the questions on stderr, the answers posted to loopd, and the lines read
//! from stdin on one reader thread (started at the first question) that feeds a channel, so a
//! question that is dropped leaves no read behind. Whether to prompt at all is decided at the
//! edge ([`Prompt::terminal`]): only when stdin and stderr are terminals; a script never is
//! asked by `task` or `show --follow`. `boxctl chat` reads its messages through the same
//! source ([`Prompt::chat`], [`Prompt::read_message`]) and asks whatever stdin is: its lines
//! are the chat's own. At a terminal the chat's source reads on demand instead of ahead
//! ([`Lines::terminal`], [`crate::line_editor`]): its messages with line editing and history;
//! a question dropped there leaves its plain read behind, which gives the next message.

use crate::client::{Client, ClientError, EventStream, StreamItem};
use crate::line_editor::TerminalReads;
use bxcore::{ApprovalDecision, ApprovalId, TurnEvent};
use proto::api::{ApprovalAnswer, OwnerAnswer};
use std::collections::VecDeque;
use std::io::{self, BufRead, IsTerminal, Write};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// The reason recorded (and read by the model) when the owner answers anything but `y` at the
/// prompt.
pub const DENIED_AT_PROMPT: &str = "denied at the prompt by the owner";

/// What the prompt wants done, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Ask this question on stderr; only lines typed after it answer it.
    Ask(String),
    /// Say this on stderr.
    Say(String),
    /// Post this answer to loopd.
    Answer {
        /// The approval answered.
        id: ApprovalId,
        /// The answer.
        answer: ApprovalAnswer,
    },
}

/// Which approvals wait to be asked about, which is being asked, and what to do next. No I/O.
#[derive(Debug, Default)]
pub struct Prompter {
    waiting: VecDeque<ApprovalId>,
    asking: Option<ApprovalId>,
    /// Stdin ended: nothing more is asked.
    closed: bool,
}

/// The answer a line typed at the prompt gives: `y`/`yes` approve, anything else denies.
pub fn answer_of(line: &str) -> ApprovalAnswer {
    let word = line.trim().to_ascii_lowercase();
    if word == "y" || word == "yes" {
        ApprovalAnswer {
            answer: OwnerAnswer::Approve,
            reason: None,
        }
    } else {
        ApprovalAnswer {
            answer: OwnerAnswer::Deny,
            reason: Some(DENIED_AT_PROMPT.into()),
        }
    }
}

/// Whether boxctl asks inline: only an owner at a terminal can answer, so stdin and stderr
/// must both be terminals; and boxctl must be the terminal's foreground job, since a
/// background job (`boxctl task ... &`) that read the terminal would be stopped by it.
pub fn asks_at(stdin_is_terminal: bool, stderr_is_terminal: bool, foreground: bool) -> bool {
    stdin_is_terminal && stderr_is_terminal && foreground
}

/// How a decision that came before an answer at the prompt reads.
fn decided_words(decision: ApprovalDecision) -> &'static str {
    match decision {
        ApprovalDecision::TimedOut => "timed out: nobody answered in time",
        ApprovalDecision::Void => "void: the wait ended without an answer",
        ApprovalDecision::Approved | ApprovalDecision::ApprovedForTurn => {
            "approved from another boxctl"
        }
        ApprovalDecision::Denied => "denied from another boxctl",
    }
}

impl Prompter {
    /// A prompter with nothing to ask.
    pub fn new() -> Prompter {
        Prompter::default()
    }

    /// Whether a question is open, so that a line typed now answers it.
    pub fn is_asking(&self) -> bool {
        self.asking.is_some()
    }

    /// What `event` (printed already) asks for. A subagent's approvals are asked like the
    /// turn's own: it is the same owner.
    pub fn event(&mut self, event: &TurnEvent) -> Vec<Effect> {
        let mut inner = event;
        let mut nested = false;
        while let TurnEvent::Subagent { event, .. } = inner {
            inner = event;
            nested = true;
        }
        match inner {
            TurnEvent::ApprovalRequested { approval, .. } => {
                if !self.closed
                    && self.asking.as_ref() != Some(approval)
                    && !self.waiting.contains(approval)
                {
                    self.waiting.push_back(approval.clone());
                }
                self.ask_next()
            }
            TurnEvent::ApprovalDecided {
                approval, decision, ..
            } => {
                if self.asking.as_ref() == Some(approval) {
                    self.asking = None;
                    let mut effects = vec![Effect::Say(format!(
                        "\nboxctl: approval {approval} is {}; the question is dropped\n",
                        decided_words(*decision)
                    ))];
                    effects.extend(self.ask_next());
                    effects
                } else {
                    // Answered here already, or not asked yet: nothing to say.
                    self.waiting.retain(|w| w != approval);
                    Vec::new()
                }
            }
            // Only the turn's own end ends its waits; a subagent's end is not the turn's.
            TurnEvent::Ended { .. } if !nested => {
                self.waiting.clear();
                match self.asking.take() {
                    Some(id) => vec![Effect::Say(format!(
                        "\nboxctl: the turn ended; approval {id} is no longer asked\n"
                    ))],
                    None => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }

    /// What a line typed (`None`: stdin ended) does. A line typed while nothing is asked is
    /// not an answer to a later question, and is dropped.
    pub fn line(&mut self, line: Option<&str>) -> Vec<Effect> {
        match line {
            Some(_) if self.asking.is_none() => Vec::new(),
            Some(text) => {
                let Some(id) = self.asking.take() else {
                    return Vec::new();
                };
                let mut effects = vec![Effect::Answer {
                    id,
                    answer: answer_of(text),
                }];
                effects.extend(self.ask_next());
                effects
            }
            None => {
                self.closed = true;
                self.waiting.clear();
                match self.asking.take() {
                    Some(id) => vec![Effect::Say(format!(
                        "\nboxctl: stdin is closed, so nothing more is asked here; answer with \
                         boxctl approve {id} or boxctl deny {id}\n"
                    ))],
                    None => Vec::new(),
                }
            }
        }
    }

    fn ask_next(&mut self) -> Vec<Effect> {
        if self.asking.is_some() || self.closed {
            return Vec::new();
        }
        match self.waiting.pop_front() {
            Some(id) => {
                let question = format!("approve {id}? [y/N] ");
                self.asking = Some(id);
                vec![Effect::Ask(question)]
            }
            None => Vec::new(),
        }
    }
}

/// A source of the lines typed at the prompt, started at the first question (or the first
/// line read through [`Prompt::read_line`]).
pub struct Lines {
    start: Option<Box<dyn FnOnce() -> UnboundedReceiver<String> + Send>>,
    receiver: Option<UnboundedReceiver<String>>,
    /// Drop the lines that came before a question (a person typed them for something else);
    /// kept, they answer it in order (a script's lines, `boxctl chat` with stdin not a
    /// terminal).
    drop_typed_ahead: bool,
    /// At a terminal, for `boxctl chat`: reads on demand, messages with the line editor.
    terminal: Option<TerminalReads>,
}

impl Lines {
    /// Stdin's lines, read by one thread (started at the first question) that feeds a
    /// channel; the thread stops at the end of stdin. If it cannot start, stdin reads as
    /// ended.
    pub fn stdin() -> Lines {
        Lines::started_by(|| {
            let (sender, receiver) = unbounded_channel();
            let _ = std::thread::Builder::new()
                .name("boxctl-stdin".into())
                .spawn(move || {
                    for line in io::stdin().lock().lines() {
                        let Ok(line) = line else { break };
                        if sender.send(line).is_err() {
                            break;
                        }
                    }
                });
            receiver
        })
    }

    /// A terminal's lines for `boxctl chat`: read one at a time, when asked, by one thread
    /// that reads nothing ahead (so that the line editor gets every byte typed at it); a
    /// message with the line editor ([`Prompt::read_message`]), an answer as a plain line.
    pub fn terminal() -> Lines {
        let (terminal, receiver) = TerminalReads::start();
        Lines {
            start: None,
            receiver: Some(receiver),
            drop_typed_ahead: true,
            terminal: Some(terminal),
        }
    }

    /// These lines, but those that came before a question are kept to answer it, in order,
    /// instead of dropped.
    pub fn keeping_typed_ahead(mut self) -> Lines {
        self.drop_typed_ahead = false;
        self
    }

    /// The lines sent on `receiver` (tests); those sent before the first question answer it.
    pub fn given(receiver: UnboundedReceiver<String>) -> Lines {
        Lines::started_by(move || receiver)
    }

    fn started_by(start: impl FnOnce() -> UnboundedReceiver<String> + Send + 'static) -> Lines {
        Lines {
            start: Some(Box::new(start)),
            receiver: None,
            drop_typed_ahead: true,
            terminal: None,
        }
    }

    /// Starts the source if it is not yet; its lines.
    fn started(&mut self) -> Option<&mut UnboundedReceiver<String>> {
        if self.receiver.is_none() {
            self.receiver = self.start.take().map(|start| start());
        }
        self.receiver.as_mut()
    }

    /// Before a question: starts the source, or drops what was typed since the last one
    /// (unless typed-ahead lines are kept); at a terminal, then asks for the answer's line
    /// (unless a read is pending already).
    fn fresh(&mut self) {
        if self.receiver.is_none() || !self.drop_typed_ahead {
            self.started();
        } else if let Some(receiver) = self.receiver.as_mut() {
            while receiver.try_recv().is_ok() {
                if let Some(terminal) = self.terminal.as_mut() {
                    terminal.taken();
                }
            }
        }
        if let Some(terminal) = self.terminal.as_mut() {
            terminal.question();
        }
    }

    /// The next line (the source started now if it is not yet); `None` once it has ended.
    /// Cancel-safe: a line not returned stays for the next call.
    async fn recv(&mut self) -> Option<String> {
        let line = self.started()?.recv().await;
        if let Some(terminal) = self.terminal.as_mut() {
            terminal.taken();
        }
        line
    }

    /// The chat waits for a message: true when the line editor shows `prompt` and reads it;
    /// false when the caller shows it (not a terminal, or a dropped question's plain read is
    /// pending and gives the message).
    fn message(&mut self, prompt: &str) -> bool {
        self.terminal
            .as_mut()
            .is_some_and(|terminal| terminal.message(prompt))
    }
}

/// What the prompt waited on brought.
enum Woke {
    Item(Result<Option<StreamItem>, ClientError>),
    Line(Option<String>),
}

/// The prompt at work: a [`Prompter`] with its lines, its stderr and loopd to answer.
pub struct Prompt {
    prompter: Prompter,
    lines: Lines,
    err: Box<dyn Write + Send>,
}

impl Prompt {
    /// A prompt reading answers from `lines` and writing questions to `err`.
    pub fn new(lines: Lines, err: Box<dyn Write + Send>) -> Prompt {
        Prompt {
            prompter: Prompter::new(),
            lines,
            err,
        }
    }

    /// The prompt of an owner at a terminal: `Some` only when [`asks_at`] this process's
    /// stdin and stderr, so that scripts are never asked.
    pub fn terminal() -> Option<Prompt> {
        let stdin = io::stdin();
        let foreground = rustix::termios::tcgetpgrp(&stdin)
            .is_ok_and(|group| group == rustix::process::getpgrp());
        asks_at(stdin.is_terminal(), io::stderr().is_terminal(), foreground)
            .then(|| Prompt::new(Lines::stdin(), Box::new(io::stderr())))
    }

    /// The prompt of `boxctl chat`, which reads its messages through it too: asked whether
    /// or not stdin is a terminal (the lines are the chat's own); a person's lines typed
    /// before a question are dropped, a script's kept to answer it in order. With `editing`
    /// (a person at a terminal), read on demand with the line editor ([`Lines::terminal`]).
    pub fn chat(editing: bool) -> Prompt {
        let lines = match (editing, io::stdin().is_terminal()) {
            (true, _) => Lines::terminal(),
            (false, true) => Lines::stdin(),
            (false, false) => Lines::stdin().keeping_typed_ahead(),
        };
        Prompt::new(lines, Box::new(io::stderr()))
    }

    /// The chat's next message after `prompt` (empty: none shown): with the line editor when
    /// the lines are a terminal's and no plain read is pending, else the next line with the
    /// prompt said on stderr; `None` once the source has ended.
    pub async fn read_message(&mut self, prompt: &str) -> Option<String> {
        let edited = self.lines.message(prompt);
        if !edited {
            self.say(prompt);
        }
        let line = self.read_line().await;
        if line.is_none() && !edited && !prompt.is_empty() {
            // Ctrl-D leaves the cursor after the prompt (the editor ends its line itself).
            self.say("\n");
        }
        line
    }

    /// The next line from the prompt's source (started now if it is not yet), for a command
    /// that reads its own input through it (`boxctl chat`); `None` once the source has
    /// ended, after which nothing more is asked.
    pub async fn read_line(&mut self) -> Option<String> {
        let line = self.lines.recv().await;
        if line.is_none() {
            // Nothing is asked between turns, so closing says nothing.
            let effects = self.prompter.line(None);
            for effect in effects {
                if let Effect::Say(text) = effect {
                    self.say(&text);
                }
            }
        }
        line
    }

    /// The next item of `stream`; while a question is open, lines typed meanwhile are
    /// answers, posted to loopd through `client`.
    pub async fn next(
        &mut self,
        client: &Client,
        stream: &mut EventStream,
    ) -> Result<Option<StreamItem>, ClientError> {
        loop {
            let woke = if self.prompter.is_asking() && self.lines.receiver.is_some() {
                tokio::select! {
                    item = stream.next() => Woke::Item(item),
                    line = self.lines.recv() => Woke::Line(line),
                }
            } else {
                Woke::Item(stream.next().await)
            };
            match woke {
                Woke::Item(item) => return item,
                Woke::Line(line) => {
                    let effects = self.prompter.line(line.as_deref());
                    self.apply(client, effects).await;
                }
            }
        }
    }

    /// Asks about `event` (printed already) if it asks for the owner; drops a question its
    /// decision came before.
    pub async fn event(&mut self, client: &Client, event: &TurnEvent) {
        let effects = self.prompter.event(event);
        self.apply(client, effects).await;
    }

    async fn apply(&mut self, client: &Client, effects: Vec<Effect>) {
        for effect in effects {
            match effect {
                Effect::Ask(question) => {
                    self.lines.fresh();
                    self.say(&question);
                }
                Effect::Say(text) => self.say(&text),
                Effect::Answer { id, answer } => {
                    // The decision's own event follows on the stream; only a failure is said.
                    match client.answer_approval(&id, &answer).await {
                        Ok(_) => {}
                        Err(ClientError::Api { status: 404, .. }) => self.say(&format!(
                            "boxctl: approval {id} no longer waits (answered, timed out or \
                             void); this answer was not recorded\n"
                        )),
                        Err(e) => self.say(&format!("boxctl: cannot answer approval {id}: {e}\n")),
                    }
                }
            }
        }
    }

    /// Writes `text` on the prompt's stream (stderr), as a question is written.
    pub fn say(&mut self, text: &str) {
        // Stderr gone: nothing better to do than go on.
        let _ = self
            .err
            .write_all(text.as_bytes())
            .and_then(|()| self.err.flush());
    }
}
