//! Helpers for the end-to-end tests: find the workspace's built binaries, run them as child
//! processes that are killed when dropped, and wait (bounded) for what they print.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a test waits for a child to say it is ready.
pub const READY_TIMEOUT_MS: u64 = 20_000;

/// The directory of the workspace's debug binaries (`target/debug`), found from the test's own
/// executable (`target/debug/deps/<test>`), so `CARGO_TARGET_DIR` is honoured.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("target/debug"))
}

/// The path of binary `name`; panics with the command to run when it was not built.
pub fn binary(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --workspace --bins` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The workspace root (for `config/` files).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A child process that is killed and reaped when dropped.
pub struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Running {
    /// Starts `command` with its stdout captured line by line.
    pub fn start(mut command: Command) -> std::io::Result<Running> {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let stdout: ChildStdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Running { child, lines })
    }

    /// Waits (at most [`READY_TIMEOUT_MS`]) for a line starting with `prefix`; returns the rest.
    pub fn wait_for_line(&self, prefix: &str) -> Option<String> {
        let deadline = std::time::Instant::now() + Duration::from_millis(READY_TIMEOUT_MS);
        loop {
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            if let Some(rest) = line.strip_prefix(prefix) {
                return Some(rest.trim().to_string());
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
