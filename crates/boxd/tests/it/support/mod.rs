//! Helpers of boxd's supervisor tests: a temp dir with a boxd config whose children are
//! `boxd-test-child`, boxd run on it, and bounded waits on what the children log.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The longest any awaited condition may take, in milliseconds.
pub const WAIT_MS: u64 = 20_000;
/// How often a condition is checked, in milliseconds.
pub const POLL_MS: u64 = 20;

/// The stand-in child.
pub const CHILD: &str = env!("CARGO_BIN_EXE_boxd-test-child");

/// A boxd setup in a temp dir.
pub struct Setup {
    pub dir: tempfile::TempDir,
    pub log: PathBuf,
    toml: String,
}

impl Setup {
    /// An empty setup with `[restart]` as given, its runtime dir in the temp dir.
    pub fn new(restart: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("children.log");
        let run = dir.path().join("run");
        let toml = format!("notify = true\nruntime_dir = {run:?}\n[restart]\n{restart}\n");
        Setup { dir, log, toml }
    }

    /// Adds a child `name` ready on its socket that first starts, in the background (in the
    /// child's process group), a grandchild `{name}-grandchild` (a test child that never listens and
    /// stops only on a signal), then becomes a test child run with `opts`.
    pub fn child_with_grandchild(&mut self, name: &str, opts: &[&str]) {
        let sock = self.sock(name);
        let log = self.log.display().to_string();
        let mut script = format!(
            "'{CHILD}' {name}-grandchild '{log}' >/dev/null 2>&1 & exec '{CHILD}' {name} '{log}' --socket '{}'",
            sock.display()
        );
        for opt in opts {
            script.push_str(&format!(" '{opt}'"));
        }
        write!(
            self.toml,
            "[[children]]\nname = {name:?}\ncommand = \"/bin/sh\"\nargs = [\"-c\", {script:?}]\n\
             ready = {{ socket = {sock:?} }}\n"
        )
        .unwrap();
    }

    /// Adds `toml` to the top-level keys of the config (before any table).
    pub fn top_level(&mut self, toml: &str) {
        let at = self.toml.find("[restart]").unwrap();
        self.toml.insert_str(at, &format!("{toml}\n"));
    }

    /// A socket path in the temp dir.
    pub fn sock(&self, name: &str) -> PathBuf {
        self.dir.path().join(format!("{name}.sock"))
    }

    /// Adds a child `name` ready on its socket, run with `opts` (test-child options) and
    /// `extra` TOML lines.
    pub fn child(&mut self, name: &str, opts: &[&str], extra: &str) {
        let sock = self.sock(name);
        let mut args = vec![
            name.to_string(),
            self.log.display().to_string(),
            "--socket".into(),
            sock.display().to_string(),
        ];
        args.extend(opts.iter().map(|s| s.to_string()));
        write!(
            self.toml,
            "[[children]]\nname = {name:?}\ncommand = {CHILD:?}\nargs = {args:?}\n\
             ready = {{ socket = {sock:?} }}\n{extra}\n"
        )
        .unwrap();
    }

    /// Starts a test child `name` that is not boxd's, listening on `sock`, and waits until it
    /// listens; it is killed when dropped.
    pub fn stranger(&self, name: &str, sock: &std::path::Path) -> Stranger {
        let proc = Command::new(CHILD)
            .arg(name)
            .arg(&self.log)
            .arg("--socket")
            .arg(sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stranger = Stranger(proc);
        let listening = format!("{name} listening {}", stranger.pid());
        wait_until(&format!("{listening:?} in the children's log"), || {
            std::fs::read_to_string(&self.log)
                .unwrap_or_default()
                .lines()
                .any(|l| l == listening)
        });
        stranger
    }

    /// Adds `toml` to the config as is.
    pub fn raw(&mut self, toml: &str) {
        self.toml.push_str(toml);
        self.toml.push('\n');
    }

    /// Starts boxd on this config with `env` (and nothing else in its environment but PATH).
    pub fn start(&self, env: &[(&str, &str)]) -> Boxd {
        self.start_logging_to("boxd.stderr", env)
    }

    /// As [`Setup::start`], boxd's stderr going to `file` in the temp dir.
    pub fn start_logging_to(&self, file: &str, env: &[(&str, &str)]) -> Boxd {
        let config = self.dir.path().join("boxd.toml");
        std::fs::write(&config, &self.toml).unwrap();
        let stderr = self.dir.path().join(file);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_boxd"));
        cmd.env_clear()
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap());
        Boxd {
            proc: cmd.spawn().unwrap(),
            stderr,
            log: self.log.clone(),
        }
    }
}

/// A running boxd.
pub struct Boxd {
    pub proc: Child,
    stderr: PathBuf,
    log: PathBuf,
}

impl Boxd {
    /// What boxd logged so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// The children's log lines so far.
    pub fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The children's log lines with the pids left out (`a start`).
    pub fn events(&self) -> Vec<String> {
        self.lines()
            .iter()
            .map(|l| {
                l.rsplit_once(' ')
                    .map_or(l.as_str(), |(e, _)| e)
                    .to_string()
            })
            .collect()
    }

    /// Waits until the children's log has `line` (pids left out).
    pub fn wait_for(&self, line: &str) {
        wait_until(&format!("{line:?} in the children's log"), || {
            self.events().iter().any(|e| e == line)
        });
    }

    /// Sends boxd `signal`.
    pub fn signal(&self, signal: Signal) {
        kill(Pid::from_raw(self.proc.id() as i32), signal).unwrap();
    }

    /// Waits until boxd exits.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut status = None;
        wait_until("boxd to exit", || {
            status = self.proc.try_wait().unwrap();
            status.is_some()
        });
        status.unwrap()
    }

    /// The pids of every child start in the log.
    pub fn pids(&self) -> Vec<i32> {
        self.lines()
            .iter()
            .filter(|l| l.contains(" start "))
            .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
            .collect()
    }

    /// The pids logged with `event` (`a start`), in log order.
    pub fn pids_of(&self, event: &str) -> Vec<i32> {
        self.lines()
            .iter()
            .filter_map(|l| {
                let (e, pid) = l.rsplit_once(' ')?;
                (e == event).then(|| pid.parse().unwrap())
            })
            .collect()
    }
}

impl Drop for Boxd {
    fn drop(&mut self) {
        if self.proc.try_wait().ok().flatten().is_none() {
            let _ = self.proc.kill();
            let _ = self.proc.wait();
        }
    }
}

/// Waits (at most [`WAIT_MS`]) until `cond` holds.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while !cond() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(POLL_MS));
    }
}

/// Whether a process `pid` exists (a zombie counts).
pub fn exists(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether a process `pid` runs: it exists and is not a zombie (a killed orphan is reaped by
/// whichever process adopted it, maybe later than the test looks).
pub fn runs(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// A process the test started itself, not boxd: killed and reaped when dropped.
pub struct Stranger(Child);

impl Stranger {
    /// Its pid.
    pub fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Kills the processes it names when dropped: what a failed test would otherwise leave running.
#[derive(Default)]
pub struct KillOnDrop(pub Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in &self.0 {
            if runs(*pid) {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
        }
    }
}
