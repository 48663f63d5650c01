//! `boxctl chat` at a terminal: the built boxctl runs under a pseudo-terminal against loopd's
//! real API layer over the stub, and the test types as a person does: messages at the line
//! editor (up-arrow recalls one), answers as plain lines, Ctrl-D to end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_stub::*;
use proto::api::OwnerAnswer;
use rustix::fs::{Mode, OFlags};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};
use std::fs::File;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

/// The up-arrow key, as a terminal sends it.
const UP: &str = "\x1b[A";
/// Ctrl-D.
const END: &str = "\x04";
/// Ctrl-C.
const INTERRUPT: &str = "\x03";
/// What the line editor writes once the terminal is in its raw mode (bracketed paste on): a
/// key typed before it would be read by the terminal's cooked mode.
const EDITOR_READY: &str = "\x1b[?2004h";

/// boxctl with a pseudo-terminal as its stdin, stdout and stderr; what it printed so far, and
/// how much of it the test has seen.
struct Terminal {
    child: Child,
    master: File,
    output: Receiver<Vec<u8>>,
    seen: String,
    looked: usize,
}

impl Terminal {
    fn start(socket: PathBuf, args: &[&str]) -> Terminal {
        let flags = OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC;
        let master = openpt(flags).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let size = Winsize {
            ws_row: 24,
            ws_col: 100,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        tcsetwinsize(&master, size).unwrap();
        let name = ptsname(&master, Vec::new()).unwrap();
        let open = OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC;
        let slave = rustix::fs::open(name.as_c_str(), open, Mode::empty()).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_boxctl"));
        cmd.env_clear()
            .env("BOXCTL_SOCKET", &socket)
            .env("TERM", "xterm")
            .env("NO_COLOR", "1")
            .args(args)
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        let child = cmd.spawn().unwrap();
        // The slave's last copy here: once boxctl exits, reading the master ends.
        drop(cmd);
        let master = File::from(master);
        let mut reader = master.try_clone().unwrap();
        let (sender, output) = channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                if sender.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        Terminal {
            child,
            master,
            output,
            seen: String::new(),
            looked: 0,
        }
    }

    /// Waits until boxctl prints `text` after what the test saw last; then that is seen.
    fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        loop {
            if let Some(at) = self.seen[self.looked..].find(text) {
                self.looked += at + text.len();
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => panic!("{text:?} never came; the terminal shows:\n{}", self.seen),
            }
        }
    }

    /// Types `keys` at the terminal.
    fn type_keys(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
    }

    /// Waits until boxctl exits (its terminal closes); its exit code.
    fn exit_code(mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.output.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("boxctl did not end; the terminal shows:\n{}", self.seen)
                }
            }
        }
        self.child.wait().unwrap().code()
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        // A failed test leaves no boxctl behind.
        let _ = self.child.kill();
    }
}

/// The texts of the tasks the stub got.
fn texts(served: &Served) -> Vec<String> {
    let tasks = served.stub.submitted.lock().unwrap();
    tasks.iter().map(|t| t.text.clone()).collect()
}

#[tokio::test]
async fn up_arrow_resends_a_message_and_answers_stay_plain_lines() {
    let served = start();
    let socket = served.socket.clone();
    // Every wait of the terminal's is bounded by WAIT_MS itself.
    let shown = tokio::task::spawn_blocking(move || {
        let mut terminal = Terminal::start(socket, &["chat", "--session", "ask"]);
        terminal.wait_for("Ctrl-C at the prompt ends");
        terminal.wait_for(EDITOR_READY);
        terminal.type_keys("save it\r");
        terminal.wait_for("approve ap-1? [y/N] ");
        terminal.type_keys("y\r");
        terminal.wait_for("Saved.");
        terminal.wait_for(EDITOR_READY);
        // The last message, not the answer `y`: answers are no messages of the history.
        terminal.type_keys(&format!("{UP}\r"));
        terminal.wait_for("approve ap-1? [y/N] ");
        terminal.type_keys("y\r");
        terminal.wait_for("Saved.");
        terminal.wait_for(EDITOR_READY);
        terminal.type_keys(END);
        let shown = terminal.seen.clone();
        (terminal.exit_code(), shown)
    })
    .await
    .unwrap();
    assert_eq!(shown.0, Some(0), "{}", shown.1);
    assert_eq!(texts(&served), ["save it", "save it"], "{}", shown.1);
    let answered = served.stub.answered.lock().unwrap().clone();
    let answers: Vec<OwnerAnswer> = answered.iter().map(|(a, _)| a.answer).collect();
    assert_eq!(answers, [OwnerAnswer::Approve, OwnerAnswer::Approve]);
}

#[tokio::test]
async fn a_dropped_questions_pending_read_takes_the_next_message() {
    let served = start();
    let socket = served.socket.clone();
    // Every wait of the terminal's is bounded by WAIT_MS itself.
    let shown = tokio::task::spawn_blocking(move || {
        let mut terminal = Terminal::start(socket, &["chat", "--session", "ask-timeout"]);
        terminal.wait_for(EDITOR_READY);
        terminal.type_keys("first\r");
        // Asked, then timed out: the plain read asked for the answer still waits, and the
        // next message's `> ` is a plain one.
        terminal.wait_for("the question is dropped");
        terminal.wait_for("> ");
        terminal.type_keys("second\r");
        terminal.wait_for("the question is dropped");
        terminal.wait_for("> ");
        // The end of stdin at the plain read ends the chat.
        terminal.type_keys(END);
        let shown = terminal.seen.clone();
        (terminal.exit_code(), shown)
    })
    .await
    .unwrap();
    assert_eq!(shown.0, Some(0), "{}", shown.1);
    // No byte of either message was lost to another reader.
    assert_eq!(texts(&served), ["first", "second"], "{}", shown.1);
    // The editor read the first message only: not while the plain read waited.
    assert_eq!(shown.1.matches(EDITOR_READY).count(), 1, "{}", shown.1);
}

#[tokio::test]
async fn a_line_typed_after_an_answer_is_the_next_message() {
    let served = start();
    let socket = served.socket.clone();
    // Every wait of the terminal's is bounded by WAIT_MS itself.
    let shown = tokio::task::spawn_blocking(move || {
        let mut terminal = Terminal::start(socket, &["chat", "--session", "ask"]);
        terminal.wait_for(EDITOR_READY);
        terminal.type_keys("save it\r");
        terminal.wait_for("approve ap-1? [y/N] ");
        // The answer, and at once the next message, typed while the turn goes on: the plain
        // read takes one line, the editor the next.
        terminal.type_keys("y\rsave more\r");
        terminal.wait_for("Saved.");
        terminal.wait_for("approve ap-1? [y/N] ");
        terminal.type_keys("n\r");
        terminal.wait_for("nothing was saved");
        terminal.wait_for(EDITOR_READY);
        // Ctrl-C at the empty prompt ends the chat as Ctrl-D does.
        terminal.type_keys(INTERRUPT);
        let shown = terminal.seen.clone();
        (terminal.exit_code(), shown)
    })
    .await
    .unwrap();
    assert_eq!(shown.0, Some(0), "{}", shown.1);
    assert_eq!(texts(&served), ["save it", "save more"], "{}", shown.1);
    let answered = served.stub.answered.lock().unwrap().clone();
    let answers: Vec<OwnerAnswer> = answered.iter().map(|(a, _)| a.answer).collect();
    assert_eq!(answers, [OwnerAnswer::Approve, OwnerAnswer::Deny]);
}
