#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Slow clients end to end (issue 11): more half-open and trickling connections than a
//! daemon's `max_connections` (and than its open-file limit, as 1 100 connections are to the
//! default 1 024) must not stop a normal `boxctl task` from finishing, neither on loopd's
//! socket nor on brokerd's.

use bxcore::{LogRecord, SessionId, ToolOutcome, TurnEnd};
use e2e::real::heavy;
use e2e::{Running, Stack, StackOptions, binary, with_open_files_limit};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The daemons' open-file limit in these tests: the attackers alone outnumber it.
const MAX_OPEN_FILES: u64 = 96;
/// The attackers' connections: half never send a byte, half trickle a request head.
const ATTACKERS: usize = 128;
/// The daemons' connection cap in these tests.
const MAX_CONNECTIONS: usize = 16;
/// The daemons' header-read timeout in these tests, in milliseconds.
const HEADER_READ_TIMEOUT_MS: u64 = 2_000;
/// How often the attackers trickle a byte and look for connections the daemon closed.
const TICK_MS: u64 = 50;
/// How long the model takes to answer the task, in milliseconds: longer than the header-read
/// timeout, so during the task the daemon cuts trickling attackers and the attackers replace
/// them, while the task's own connection waits with nothing to send.
const MODEL_DELAY_MS: u64 = 2_500;
/// The longest a `boxctl task` may take here before the test calls the daemon stuck.
const TASK_LIMIT_MS: u64 = 30_000;

/// The connection limits both daemons get (loopd's `[api]`, brokerd's `[limits]`).
fn limits() -> String {
    format!(
        "max_connections = {MAX_CONNECTIONS}\nheader_read_timeout_ms = {HEADER_READ_TIMEOUT_MS}\n"
    )
}

/// A slow-loris attacker: holds [`ATTACKERS`] connections to a socket; every tick, trickles
/// one more byte of a never-ending request head on half of them and, when the daemon has
/// closed one, opens one more in its place (one a tick, so it is a flood of slow clients,
/// not of connects).
struct Flood {
    stop: Arc<AtomicBool>,
    /// Connections the daemon closed, as seen by the attacker.
    cut: Arc<AtomicUsize>,
    /// Connections the daemon had not closed at the attacker's last look.
    alive: Arc<AtomicUsize>,
    thread: Option<JoinHandle<()>>,
}

struct Attacker {
    stream: UnixStream,
    trickles: bool,
    /// The daemon closed it (counted once, until it is replaced).
    cut: bool,
}

impl Attacker {
    fn connect(socket: &Path, trickles: bool) -> Attacker {
        let mut stream = UnixStream::connect(socket).unwrap();
        if trickles {
            // Closed already: the next look counts it as cut.
            let _ = stream.write_all(b"GET /v1/status HTTP/1.1\r\nX-Slow: ");
        }
        stream.set_nonblocking(true).unwrap();
        Attacker {
            stream,
            trickles,
            cut: false,
        }
    }

    /// Trickles (if it does) and says whether the daemon still holds the connection.
    fn still_open(&mut self) -> bool {
        if self.trickles && self.stream.write(b"a").is_err() {
            return false;
        }
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => false,
            Ok(_) => true,
            Err(e) => e.kind() == ErrorKind::WouldBlock,
        }
    }
}

impl Flood {
    /// Opens every connection now (before the task's), then keeps them up on a thread.
    fn start(socket: &Path) -> Flood {
        let mut attackers: Vec<Attacker> = (0..ATTACKERS)
            .map(|i| Attacker::connect(socket, i % 2 == 1))
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(AtomicUsize::new(0));
        let alive = Arc::new(AtomicUsize::new(ATTACKERS));
        let socket = socket.to_path_buf();
        let thread = {
            let (stop, cut, alive) = (stop.clone(), cut.clone(), alive.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let mut reopened = false;
                    let mut open = 0;
                    for attacker in &mut attackers {
                        if !attacker.cut && attacker.still_open() {
                            open += 1;
                            continue;
                        }
                        if !attacker.cut {
                            attacker.cut = true;
                            cut.fetch_add(1, Ordering::Relaxed);
                        }
                        if !reopened {
                            *attacker = Attacker::connect(&socket, attacker.trickles);
                            reopened = true;
                        }
                    }
                    alive.store(open, Ordering::Relaxed);
                    // Pacing of the attack, not synchronisation.
                    std::thread::sleep(Duration::from_millis(TICK_MS));
                }
            })
        };
        Flood {
            stop,
            cut,
            alive,
            thread: Some(thread),
        }
    }

    /// Whether the attack is still running (its thread has not died).
    fn running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for Flood {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Runs `boxctl task` against `stack`; None when it did not finish within [`TASK_LIMIT_MS`]
/// (then it is killed).
fn task_within_limit(stack: &Stack, session: &str, text: &str) -> Option<Output> {
    let mut child = Command::new(binary("boxctl"))
        .arg("--socket")
        .arg(&stack.socket)
        .args(["task", "--session", session, text])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_millis(TASK_LIMIT_MS);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(child.wait_with_output().unwrap())
}

fn records(stack: &Stack, id: &str) -> Vec<LogRecord> {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    store.read(&SessionId::new(id).unwrap()).unwrap()
}

fn show(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts the flood was still on when the task finished, and that the daemon kept to its
/// cap: it closed (at least) all but `MAX_CONNECTIONS` of the attackers' connections.
fn assert_flood_was_on(flood: &Flood) {
    assert!(flood.running(), "the attack stopped early");
    let deadline = Instant::now() + Duration::from_millis(TASK_LIMIT_MS);
    let cut = loop {
        let cut = flood.cut.load(Ordering::Relaxed);
        if cut >= ATTACKERS - MAX_CONNECTIONS || Instant::now() > deadline {
            break cut;
        }
        std::thread::sleep(Duration::from_millis(TICK_MS));
    };
    assert!(
        cut >= ATTACKERS - MAX_CONNECTIONS,
        "the daemon closed only {cut} of {ATTACKERS} attacking connections"
    );
    assert!(
        flood.alive.load(Ordering::Relaxed) > 0,
        "no attacking connection was open any more"
    );
}

#[test]
fn a_slow_loris_on_loopds_socket_does_not_stop_a_task() {
    let _heavy = heavy();
    let stack = Stack::start(StackOptions {
        script: format!(
            "[[rule]]\nwhen_role = \"user\"\ndelay_ms = {MODEL_DELAY_MS}\nreply = \"Still here.\"\n"
        ),
        // loopd's waiting tasks must stay below its connection cap ([api] max_waiting_tasks).
        loopd_toml: format!("[api]\n{}max_waiting_tasks = 8\n", limits()),
        loopd_max_open_files: Some(MAX_OPEN_FILES),
        ..StackOptions::default()
    })
    .unwrap();
    let flood = Flood::start(&stack.socket);

    let out = task_within_limit(&stack, "flooded", "are you there?").unwrap_or_else(|| {
        panic!("boxctl task did not finish within {TASK_LIMIT_MS} ms: loopd is not serving")
    });
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Still here."),
        "{}",
        show(&out)
    );
    assert_flood_was_on(&flood);
    let ends: Vec<TurnEnd> = records(&stack, "flooded")
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::TurnEnd { end, .. } => Some(end),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [TurnEnd::Done]);
}

/// Starts brokerd on `dir/brokerd.sock` with echo granted to everyone, the test's connection
/// limits and open-file limit; waits until its socket answers.
fn start_brokerd(dir: &Path) -> (Running, PathBuf) {
    let brokerd = e2e::start_brokerd_with(
        with_open_files_limit(&binary("brokerd"), MAX_OPEN_FILES),
        dir,
        &format!(
            "[limits]\n{}[[grants]]\ntool = \"echo\"\nsessions = [\"*\"]\n",
            limits()
        ),
    );
    (brokerd, dir.join("brokerd.sock"))
}

#[test]
fn a_slow_loris_on_brokerds_socket_does_not_stop_a_tool_call() {
    let _heavy = heavy();
    let dir = tempfile::tempdir().unwrap();
    let (_brokerd, broker_socket) = start_brokerd(dir.path());
    let script = format!(
        r#"
[[rule]]
when_role = "user"
times = 1
delay_ms = {MODEL_DELAY_MS}
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\":\"echo\",\"arguments\":{{\"text\":\"through the flood\"}}}}" }}]

[[rule]]
when_role = "tool"
reply = "The echo came back."
"#
    );
    let stack = Stack::start(StackOptions {
        script,
        // A short call timeout, so a stuck brokerd fails the call well within the task limit.
        loopd_toml: format!("[broker]\nsocket = {broker_socket:?}\ncall_timeout_ms = 5000\n"),
        ..StackOptions::default()
    })
    .unwrap();
    let flood = Flood::start(&broker_socket);

    let out = task_within_limit(&stack, "tools", "echo something")
        .unwrap_or_else(|| panic!("boxctl task did not finish within {TASK_LIMIT_MS} ms"));
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let results: Vec<(ToolOutcome, String)> = records(&stack, "tools")
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult {
                outcome, content, ..
            } => Some((outcome, content)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, ToolOutcome::Ok, "{results:?}");
    assert!(results[0].1.contains("through the flood"), "{results:?}");
    assert_flood_was_on(&flood);
}
