//! The stack of one task: boxd started on the task's layout, driven with the real `boxctl`
//! (prompts, compactions, the owner's answers to approvals), and stopped.

use crate::layout::SESSION;
use crate::task::Approvals;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the stack may take to start (a model to load), in milliseconds.
pub const START_TIMEOUT_MS: u64 = 300_000;
/// How long one prompt's turn may take, in milliseconds.
pub const STEP_TIMEOUT_MS: u64 = 900_000;
/// How long boxd may take to stop after SIGTERM, in milliseconds.
pub const STOP_TIMEOUT_MS: u64 = 60_000;
/// How often the runner looks for the stack, a turn's end and waiting approvals.
pub const POLL_MS: u64 = 100;

/// A running boxd.
pub struct Stack {
    boxd: Child,
    boxctl: PathBuf,
    socket: PathBuf,
}

impl Stack {
    /// Starts boxd with `config` (its log in `log`) and waits until loopd answers.
    pub fn start(bin: &Path, config: &Path, socket: &Path, log: &Path) -> anyhow::Result<Stack> {
        let log_file = std::fs::File::create(log)?;
        let boxd = Command::new(bin.join("boxd"))
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot start boxd: {e}"))?;
        let mut stack = Stack {
            boxd,
            boxctl: bin.join("boxctl"),
            socket: socket.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_millis(START_TIMEOUT_MS);
        loop {
            if let Some(status) = stack.boxd.try_wait()? {
                anyhow::bail!(
                    "boxd exited ({status}) before loopd answered; see {}",
                    log.display()
                );
            }
            if stack.boxctl(&["status"]).output()?.status.success() {
                return Ok(stack);
            }
            if Instant::now() > deadline {
                anyhow::bail!(
                    "loopd did not answer within {START_TIMEOUT_MS} ms; see {}",
                    log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
    }

    /// `boxctl --socket <loopd's> ARGS`, not yet run.
    fn boxctl(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.boxctl);
        command
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// Runs one prompt in the task's session to the turn's end, answering the calls that wait
    /// for the owner as `approvals` says. Returns what boxctl printed.
    pub fn prompt(&self, text: &str, approvals: Approvals) -> anyhow::Result<String> {
        let out = tempfile_in_memory()?;
        let mut task = self
            .boxctl(&["task", "--session", SESSION, text])
            .stdout(out.try_clone()?)
            .stderr(out.try_clone()?)
            .spawn()?;
        let deadline = Instant::now() + Duration::from_millis(STEP_TIMEOUT_MS);
        let mut answered: Vec<String> = Vec::new();
        loop {
            if task.try_wait()?.is_some() {
                break;
            }
            if Instant::now() > deadline {
                let _ = task.kill();
                let _ = task.wait();
                anyhow::bail!("the turn did not end within {STEP_TIMEOUT_MS} ms");
            }
            if approvals != Approvals::Ignore {
                self.answer_approvals(approvals, &mut answered)?;
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
        read_back(out)
    }

    /// Answers every call of the task's session that waits for the owner and was not
    /// answered yet.
    fn answer_approvals(
        &self,
        approvals: Approvals,
        answered: &mut Vec<String>,
    ) -> anyhow::Result<()> {
        let out = self.boxctl(&["--json", "approvals"]).output()?;
        if !out.status.success() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&out.stdout);
        for line in text.lines() {
            let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let items = match &value {
                serde_json::Value::Array(items) => items.clone(),
                serde_json::Value::Object(o) => o
                    .get("approvals")
                    .and_then(|a| a.as_array())
                    .cloned()
                    .unwrap_or_else(|| vec![value.clone()]),
                _ => continue,
            };
            for item in items {
                let id = item.get("id").and_then(|v| v.as_str()).unwrap_or("");
                let session = item.get("session").and_then(|v| v.as_str()).unwrap_or("");
                if id.is_empty() || session != SESSION || answered.iter().any(|a| a == id) {
                    continue;
                }
                let verb = match approvals {
                    Approvals::Approve => vec!["approve", id],
                    Approvals::Deny => vec!["deny", id, "--reason", "the owner says no"],
                    Approvals::Ignore => continue,
                };
                self.boxctl(&verb).output()?;
                answered.push(id.to_string());
            }
        }
        Ok(())
    }

    /// Compacts the task's session now (`boxctl compact`).
    pub fn compact(&self) -> anyhow::Result<String> {
        let out = self.boxctl(&["compact", SESSION]).output()?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            anyhow::bail!("boxctl compact failed ({}): {text}", out.status);
        }
        Ok(text)
    }

    /// `boxctl undo SESSION --turns TURNS`: what it said.
    pub fn undo(&self, turns: u32) -> anyhow::Result<String> {
        let turns = turns.to_string();
        let out = self
            .boxctl(&["undo", SESSION, "--turns", &turns])
            .output()?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            anyhow::bail!("boxctl undo failed ({}): {text}", out.status);
        }
        Ok(text)
    }

    /// Stops boxd (SIGTERM, then SIGKILL after [`STOP_TIMEOUT_MS`]) and waits for it.
    pub fn stop(mut self) -> anyhow::Result<()> {
        let pid = self.boxd.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_millis(STOP_TIMEOUT_MS);
        while self.boxd.try_wait()?.is_none() {
            if Instant::now() > deadline {
                let _ = self.boxd.kill();
                let _ = self.boxd.wait();
                anyhow::bail!("boxd did not stop within {STOP_TIMEOUT_MS} ms; killed");
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
        Ok(())
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        if matches!(self.boxd.try_wait(), Ok(None)) {
            let _ = Command::new("kill")
                .args(["-TERM", &self.boxd.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_millis(STOP_TIMEOUT_MS);
            while matches!(self.boxd.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(POLL_MS));
            }
            let _ = self.boxd.kill();
            let _ = self.boxd.wait();
        }
    }
}

/// An anonymous file for a child's output (no pipe to drain while polling).
fn tempfile_in_memory() -> std::io::Result<std::fs::File> {
    tempfile::tempfile()
}

/// What was written to `file`, from its start.
fn read_back(mut file: std::fs::File) -> anyhow::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(0))?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}
