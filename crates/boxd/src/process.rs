//! One running child: started with its environment cleaned, its output logged line by line
//! tagged with its name, reaped by a task of its own, and stopped with SIGTERM then SIGKILL.

use crate::config::Child;
use crate::error::Error;
use crate::notify::SYSTEMD_ENV;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::{mpsc, watch};

/// Said by a child's reaper when the child has exited.
#[derive(Debug, Clone)]
pub struct Exited {
    /// The child's index in the config.
    pub index: usize,
    /// Which start of that child it was (see [`spawn`]).
    pub generation: u64,
    /// How it exited, in words.
    pub status: String,
}

/// A started child.
#[derive(Debug)]
pub struct Running {
    name: String,
    pid: u32,
    stop_grace_ms: u64,
    exit: watch::Receiver<Option<String>>,
}

/// Starts `child` (the `index`th, its `generation`th start). Its exit is sent on `events`.
pub fn spawn(
    child: &Child,
    index: usize,
    generation: u64,
    events: mpsc::UnboundedSender<Exited>,
) -> Result<Running, Error> {
    let mut cmd = tokio::process::Command::new(&child.command);
    cmd.args(&child.args).envs(&child.env);
    for name in SYSTEMD_ENV {
        cmd.env_remove(name);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let spawn_error = |source| Error::Spawn {
        name: child.name.clone(),
        command: child.command.clone(),
        source,
    };
    let mut proc = cmd.spawn().map_err(spawn_error)?;
    let pid = proc.id().ok_or_else(|| {
        spawn_error(std::io::Error::other(
            "the child exited before its pid was known",
        ))
    })?;
    if let Some(out) = proc.stdout.take() {
        tokio::spawn(log_lines(child.name.clone(), "stdout", out));
    }
    if let Some(err) = proc.stderr.take() {
        tokio::spawn(log_lines(child.name.clone(), "stderr", err));
    }
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        let status = match proc.wait().await {
            Ok(status) => status.to_string(),
            Err(e) => format!("cannot wait for it: {e}"),
        };
        let _ = tx.send(Some(status.clone()));
        let _ = events.send(Exited {
            index,
            generation,
            status,
        });
    });
    tracing::info!(child = %child.name, pid, "started");
    Ok(Running {
        name: child.name.clone(),
        pid,
        stop_grace_ms: child.stop_grace_ms,
        exit: rx,
    })
}

/// Logs each line of a child's `stream` tagged with the child's name.
async fn log_lines(name: String, stream: &'static str, out: impl AsyncRead + Unpin) {
    let mut lines = BufReader::new(out).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::info!(child = %name, stream, "{line}");
    }
}

impl Running {
    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until the child has exited (and been reaped); says how.
    pub async fn exited(&mut self) -> String {
        match self.exit.wait_for(Option::is_some).await {
            Ok(status) => status.clone().unwrap_or_default(),
            Err(_) => "its reaper is gone".to_string(),
        }
    }

    /// Stops the child: SIGTERM, then SIGKILL after its stop grace; returns once it has
    /// been reaped.
    pub async fn stop(mut self) {
        if self.exit.borrow().is_some() {
            return;
        }
        let pid = Pid::from_raw(i32::try_from(self.pid).unwrap_or(i32::MAX));
        tracing::info!(child = %self.name, pid = self.pid, grace_ms = self.stop_grace_ms, "stopping (SIGTERM)");
        let _ = kill(pid, Signal::SIGTERM);
        let status = match tokio::time::timeout(
            Duration::from_millis(self.stop_grace_ms),
            self.exited(),
        )
        .await
        {
            Ok(status) => status,
            Err(_) => {
                tracing::warn!(child = %self.name, pid = self.pid, "still running after its stop grace: SIGKILL");
                let _ = kill(pid, Signal::SIGKILL);
                self.exited().await
            }
        };
        tracing::info!(child = %self.name, %status, "stopped");
    }
}
