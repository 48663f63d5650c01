//! One running child: started through `boxd --exec-child` (so it dies with boxd, see
//! [`exec_child`](crate::exec_child)) in a process group of its own, with its environment
//! cleaned; its output logged line by line tagged with its name, each line at the level it
//! carries; reaped by a task of its own, which then kills what it left in its group; stopped
//! with SIGTERM then SIGKILL.

use crate::config::Child;
use crate::error::Error;
use crate::exec_child;
use crate::metrics::{self, Metrics};
use crate::notify::SYSTEMD_ENV;
use crate::procs;
use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::{mpsc, watch};

/// The target of the children's lines that boxd logs (`child` and `stream` fields).
pub const CHILD_TARGET: &str = "boxd::child";

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
    start_ticks: Option<u64>,
    stop_grace_ms: u64,
    exit: watch::Receiver<Option<String>>,
}

/// boxd's own binary, as the kernel knows it: it names the running binary even when the file
/// was replaced or deleted since (a rebuild, an upgrade), which `current_exe`'s path would not.
/// Resolved in the forked child, `self` is a copy of boxd until it executes.
pub const SELF_EXE: &str = "/proc/self/exe";

/// The search path for a program named without a `/` when neither the child's `env` nor
/// boxd's environment has `PATH` (what `execvp` uses then).
pub const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Finds `child`'s program as `execvp` would (a name with a `/` from the working directory,
/// otherwise in the child's `PATH`), so a missing one fails the start by name, here, rather
/// than in `boxd --exec-child` after the fork.
fn resolve(child: &Child) -> std::io::Result<PathBuf> {
    let path = child
        .env
        .get("PATH")
        .map(OsString::from)
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| DEFAULT_PATH.into());
    let cwd = std::env::current_dir()?;
    which::which_in(&child.command, Some(&path), &cwd).map_err(|_| {
        let said = if child.command.contains('/') {
            format!(
                "no executable file at {}",
                cwd.join(&child.command).display()
            )
        } else {
            format!(
                "no executable file of that name in PATH {}",
                path.to_string_lossy()
            )
        };
        std::io::Error::new(std::io::ErrorKind::NotFound, said)
    })
}

/// Starts `child` (the `index`th, its `generation`th start). Its exit is sent on `events`,
/// after it is in `metrics`.
///
/// Call it on boxd's main thread: the child's parent-death signal comes when the thread that
/// forked it ends (boxd's runtime is current-thread, so every task runs there).
pub fn spawn(
    child: &Child,
    index: usize,
    generation: u64,
    events: mpsc::UnboundedSender<Exited>,
    metrics: &Arc<Metrics>,
) -> Result<Running, Error> {
    let spawn_error = |source| Error::Spawn {
        name: child.name.clone(),
        command: child.command.clone(),
        source,
    };
    let program = resolve(child).map_err(spawn_error)?;
    let mut cmd = tokio::process::Command::new(SELF_EXE);
    cmd.arg0("boxd")
        .args(exec_child::args(
            std::process::id(),
            &program,
            &child.command,
            &child.args,
        ))
        .envs(&child.env);
    for name in SYSTEMD_ENV {
        cmd.env_remove(name);
    }
    // A group of its own (its id: the child's pid) holds whatever the child starts, so boxd can
    // kill what it leaves; and a terminal's Ctrl-C reaches boxd alone, which stops the children
    // in order.
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut proc = cmd.spawn().map_err(spawn_error)?;
    let pid = proc.id().ok_or_else(|| {
        spawn_error(std::io::Error::other(
            "the child exited before its pid was known",
        ))
    })?;
    // Not yet reaped (its reaper starts below), so the pid is still the child's.
    let start_ticks = i32::try_from(pid)
        .ok()
        .and_then(procs::stat)
        .map(|s| s.start_ticks);
    if let Some(out) = proc.stdout.take() {
        tokio::spawn(log_lines(child.name.clone(), "stdout", out));
    }
    if let Some(err) = proc.stderr.take() {
        tokio::spawn(log_lines(child.name.clone(), "stderr", err));
    }
    metrics.started(index);
    let (tx, rx) = watch::channel(None);
    let name = child.name.clone();
    let metrics = Arc::clone(metrics);
    tokio::spawn(async move {
        let (status, code) = match proc.wait().await {
            Ok(status) => (status.to_string(), metrics::exit_status(&status)),
            Err(e) => (format!("cannot wait for it: {e}"), None),
        };
        kill_group_rest(&name, pid);
        metrics.exited(index, code);
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
        start_ticks,
        stop_grace_ms: child.stop_grace_ms,
        exit: rx,
    })
}

/// Kills what child `name` (`pid`, reaped) left in its process group: nothing of it may run
/// on without it. The group's id cannot be another's while the group has a member.
fn kill_group_rest(name: &str, pid: u32) {
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    match killpg(Pid::from_raw(raw), Signal::SIGKILL) {
        Ok(()) => tracing::warn!(child = %name, pid, "killed what it left in its process group"),
        Err(Errno::ESRCH) => {}
        Err(e) => {
            tracing::warn!(child = %name, pid, "cannot kill what it left in its process group: {e}")
        }
    }
}

/// Logs each line of a child's `stream` tagged with the child's name, at its level ([`relog`]).
async fn log_lines(name: String, stream: &'static str, out: impl AsyncRead + Unpin) {
    let mut lines = BufReader::new(out).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        relog(&name, stream, &line);
    }
}

/// Logs `line` of child `name`'s `stream`: a daemon's log line (`bxconfig::split_log_line`) at
/// its own level, without the child's time and level (boxd's record has both); any other line
/// (llama-server's, a continuation line) whole at INFO.
fn relog(name: &str, stream: &str, line: &str) {
    use tracing::{Level, debug, error, info, trace, warn};
    match bxconfig::split_log_line(line) {
        Some((Level::ERROR, text)) => error!(target: CHILD_TARGET, child = %name, stream, "{text}"),
        Some((Level::WARN, text)) => warn!(target: CHILD_TARGET, child = %name, stream, "{text}"),
        Some((Level::DEBUG, text)) => debug!(target: CHILD_TARGET, child = %name, stream, "{text}"),
        Some((Level::TRACE, text)) => trace!(target: CHILD_TARGET, child = %name, stream, "{text}"),
        Some((_, text)) => info!(target: CHILD_TARGET, child = %name, stream, "{text}"),
        None => info!(target: CHILD_TARGET, child = %name, stream, "{line}"),
    }
}

impl Running {
    /// The child's pid (also its process group's id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// When the child started, in clock ticks since boot (`None`: it was gone before boxd
    /// could read it).
    pub fn start_ticks(&self) -> Option<u64> {
        self.start_ticks
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
