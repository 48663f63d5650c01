//! An MCP server runs as brokerd's own user, so the uid check alone would let it call brokerd as
//! any session. These tests run the real `brokerd` with `brokerd-test-mcp` as an MCP server
//! under an attacker's control: it, and an orphan it double-forks, forge a `read_file` of a
//! granted secret for session `main`. Both must be refused, while the test process (brokerd's
//! parent, as loopd is a non-descendant) is served. No Node.js or network needed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use brokerd::daemon::SERVING;
use http::{Method, StatusCode};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use proto::ToolResponse;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// How long a test waits for brokerd or the attackers, in milliseconds.
const WAIT_MS: u64 = 30_000;
/// How often a test looks again while waiting for a file or a process, in milliseconds.
const POLL_MS: u64 = 20;
/// What the secret file holds: must never reach the attackers.
const SECRET: &str = "the owner's secret: 7f3c9a";

/// A running brokerd with the attacking MCP server, and where things are.
struct Attacked {
    dir: tempfile::TempDir,
    brokerd: Child,
    log: Receiver<String>,
}

impl Attacked {
    fn socket(&self) -> PathBuf {
        self.dir.path().join("brokerd.sock")
    }
    fn secret(&self) -> PathBuf {
        self.dir.path().join("secret.txt")
    }
    fn out(&self) -> PathBuf {
        self.dir.path().join("out")
    }
    fn pid(&self) -> u32 {
        self.brokerd.id()
    }

    /// Starts brokerd with a `read_file` grant on the secret for `main` and the attacker as its
    /// MCP server; returns once brokerd says it serves.
    fn start() -> Attacked {
        Attacked::start_with(|attacker| (attacker.to_owned(), Vec::new()))
    }

    /// [`Attacked::start`], with the MCP server's command and the arguments before the
    /// attacker's own (`serve SOCKET SECRET OUT`) made by `command` from the attacker's path.
    fn start_with(command: impl FnOnce(&str) -> (String, Vec<String>)) -> Attacked {
        let dir = tempfile::tempdir().unwrap();
        let (socket, secret, out) = (
            dir.path().join("brokerd.sock"),
            dir.path().join("secret.txt"),
            dir.path().join("out"),
        );
        std::fs::write(&secret, SECRET).unwrap();
        std::fs::create_dir(&out).unwrap();
        let (program, mut args) = command(env!("CARGO_BIN_EXE_brokerd-test-mcp"));
        args.extend(["serve".into(), text(&socket), text(&secret), text(&out)]);
        let config = format!(
            "[[grants]]\ntool = \"read_file\"\nsessions = [\"main\"]\npaths = [{secret:?}]\n\n\
             [[mcp]]\nname = \"attacker\"\ncommand = {program:?}\nprefix = \"evil\"\n\
             args = {args:?}\n",
            secret = text(&secret),
        );
        let cfg = dir.path().join("brokerd.toml");
        std::fs::write(&cfg, config).unwrap();
        let mut brokerd = Command::new(env!("CARGO_BIN_EXE_brokerd"))
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .args(["--config", &cfg.display().to_string()])
            .args(["--socket", &socket.display().to_string()])
            .args([
                "--state-dir",
                &dir.path().join("state").display().to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (lines, log) = std::sync::mpsc::channel();
        let pipe = brokerd.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let attacked = Attacked { dir, brokerd, log };
        attacked.wait_for_log(SERVING);
        attacked
    }

    /// Waits for a log line containing `text`; panics with the log so far if none comes.
    fn wait_for_log(&self, text: &str) -> String {
        let mut seen = String::new();
        loop {
            let line = self
                .log
                .recv_timeout(Duration::from_millis(WAIT_MS))
                .unwrap_or_else(|e| panic!("no {text:?} in brokerd's log ({e}); log:\n{seen}"));
            if line.contains(text) {
                return line;
            }
            seen.push_str(&line);
            seen.push('\n');
        }
    }

    /// Waits for the attacker's report `name` and returns it.
    fn report(&self, name: &str) -> String {
        let path = self.out().join(name);
        let found = wait_until(|| path.exists());
        assert!(found, "the attacker wrote no {name} in {WAIT_MS} ms");
        std::fs::read_to_string(path).unwrap()
    }

    /// Stops brokerd with SIGTERM and checks that it exits 0 within [`WAIT_MS`].
    fn stop(mut self) {
        kill(Pid::from_raw(self.pid() as i32), Signal::SIGTERM).unwrap();
        let mut status = None;
        let exited = wait_until(|| {
            status = self.brokerd.try_wait().unwrap();
            status.is_some()
        });
        if !exited {
            self.brokerd.kill().unwrap();
            self.brokerd.wait().unwrap();
        }
        assert!(
            exited,
            "brokerd did not exit within {WAIT_MS} ms of SIGTERM"
        );
        assert_eq!(
            status.unwrap().code(),
            Some(0),
            "brokerd did not stop cleanly"
        );
    }
}

/// A path as TOML text.
fn text(path: &Path) -> String {
    path.display().to_string()
}

/// Polls `condition` until it holds, at most [`WAIT_MS`]; whether it did.
fn wait_until(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while !condition() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(POLL_MS));
    }
    true
}

/// An attacker's report shows brokerd refused it: a 403, or no connection at all.
fn assert_refused(who: &str, report: &str) {
    assert!(
        report.starts_with("HTTP/1.1 403") || report.starts_with("connect failed"),
        "{who} was not refused:\n{report}"
    );
    assert!(!report.contains(SECRET), "{who} got the secret:\n{report}");
}

/// The `(state, ppid)` of process `pid` from `/proc/<pid>/stat`, or `None` once it is gone.
fn state_and_parent(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let mut fields = after_name.split(' ');
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_peer_an_mcp_server_and_its_orphan_cannot_call_brokerd() {
    let attacked = Attacked::start();

    // The grant works: brokerd's parent (a non-descendant, like loopd) reads the secret.
    let call = common::request(
        "main",
        1,
        "read_file",
        &serde_json::json!({"path": attacked.secret()}).to_string(),
    );
    let (status, bytes) = common::http(
        &attacked.socket(),
        Method::POST,
        "/v1/call",
        Some(serde_json::to_vec(&call).unwrap()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let response: ToolResponse = serde_json::from_slice(&bytes).unwrap();
    assert!(
        matches!(&response, ToolResponse::Result { content, .. } if content.contains(SECRET)),
        "{response:?}"
    );

    assert_refused("the MCP server", &attacked.report("direct"));
    assert_refused("the MCP server's orphan", &attacked.report("orphan"));
    let pids = attacked.report("orphan-pid");
    let (_, parent) = pids.split_once(' ').unwrap();
    assert_eq!(
        parent.parse::<u32>().unwrap(),
        attacked.pid(),
        "the orphan was reparented to brokerd (its subreaper)"
    );
    attacked.wait_for_log("is brokerd's own descendant");
    attacked.stop();
}

#[test]
fn mcp_peer_brokerd_reaps_the_orphans_it_adopts() {
    let attacked = Attacked::start();
    let pids = attacked.report("orphan-pid");
    let (orphan, parent) = pids.split_once(' ').unwrap();
    let orphan: u32 = orphan.parse().unwrap();
    assert_eq!(parent.parse::<u32>().unwrap(), attacked.pid());
    attacked.report("orphan");
    // The orphan exits after its attack: brokerd, its parent now, must reap it, not leave a
    // zombie (nor reap it twice: the MCP server, which tokio reaps, stays up).
    let reaped = wait_until(|| state_and_parent(orphan).is_none_or(|(_, p)| p != attacked.pid()));
    assert!(
        reaped,
        "the orphan {orphan} is still brokerd's child: {:?}",
        state_and_parent(orphan)
    );
    attacked.wait_for_log("reaped an adopted orphan");
    let attacker_running = children_of(attacked.pid())
        .into_iter()
        .any(|pid| state_and_parent(pid).is_some_and(|(state, _)| state != 'Z'));
    assert!(attacker_running, "the MCP server itself is still running");
    attacked.stop();
}

#[test]
fn mcp_peer_brokerd_stops_although_an_adopted_descendant_ignores_sigterm() {
    // The server leaves a child in its process group that ignores SIGTERM; once the server
    // exits, brokerd (their subreaper) is that child's parent, and a wait for the whole group
    // would keep brokerd from exiting.
    let attacked = Attacked::start_with(|attacker| {
        let script = format!("(trap '' TERM; exec sleep 600) & exec {attacker:?} \"$@\"");
        (
            String::from("sh"),
            vec![String::from("-c"), script, String::from("sh")],
        )
    });
    let mut lingering = Vec::new();
    let started = wait_until(|| {
        lingering = children_of(attacked.pid())
            .into_iter()
            .flat_map(children_of)
            .filter(|&pid| comm(pid).as_deref() == Some("sleep"))
            .collect();
        !lingering.is_empty()
    });
    assert!(started, "the MCP server's lingering child did not start");
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| attacked.stop()));
    for pid in lingering {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// The pids of the processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| state_and_parent(pid).is_some_and(|(_, p)| p == parent))
        .collect()
}

/// The command name of process `pid`.
fn comm(pid: u32) -> Option<String> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end().to_owned())
}
