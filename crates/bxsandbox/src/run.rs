//! One run of a spec inside the walls: bubblewrap started, stdin fed, stdout and stderr read
//! past their cap (kept up to it, counted beyond), and the whole tree killed at the timeout.

use crate::bwrap::{command_line, environment};
use crate::spec::{Spec, SpecError, resolve};
use crate::walls::Walls;
use command_fds::CommandFdExt;
use std::fmt;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The bytes read from a pipe at a time (bytes).
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// How long the output is read after bubblewrap is gone (milliseconds): its pid namespace
/// dies with it, so the pipes close at once; this only bounds a kernel that lags.
const DRAIN_AFTER_EXIT_MS: u64 = 2_000;
/// Exit statuses above this are the shell convention for "killed by signal (status - 128)",
/// which bubblewrap follows when its program dies of a signal.
const SIGNAL_EXIT_BASE: i32 = 128;
/// The highest signal number a status can encode (Linux's `SIGRTMAX`).
const MAX_SIGNAL: i32 = 64;

/// How the program ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// It exited with this status.
    Exited(i32),
    /// It was killed by this signal (an `RLIMIT_CPU` overrun is `SIGXCPU`, 24). bubblewrap
    /// reports a signal as exit status 128 + n, as shells do, so a program that itself exits
    /// with 129 to 192 reads as signalled too.
    Signalled(i32),
    /// It ran past `timeout_ms` and its whole tree was killed.
    TimedOut,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Exited(code) => write!(f, "exited with status {code}"),
            Status::Signalled(signal) => write!(f, "killed by signal {signal}"),
            Status::TimedOut => write!(f, "timed out"),
        }
    }
}

/// One output stream, capped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// The first `max_output_bytes` bytes.
    pub bytes: Vec<u8>,
    /// How many bytes the program wrote in all.
    pub total_bytes: u64,
    /// Whether bytes were dropped (`total_bytes` > `bytes.len()`).
    pub truncated: bool,
}

/// What a run gave back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// How it ended.
    pub status: Status,
    /// Its stdout, capped.
    pub stdout: Output,
    /// Its stderr, capped.
    pub stderr: Output,
    /// From the start of bubblewrap to the end of the output (milliseconds).
    pub wall_ms: u64,
}

/// Why a run could not happen at all (the program's own failures are an `Outcome`).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The spec was not valid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// bubblewrap could not be started.
    #[error("cannot start bubblewrap ({bwrap}): {source}")]
    Spawn {
        /// Its path.
        bwrap: String,
        /// Why.
        source: std::io::Error,
    },
    /// Waiting for bubblewrap failed.
    #[error("waiting for bubblewrap: {0}")]
    Wait(std::io::Error),
    /// The run has network and its network could not be made (see `net`).
    #[error(transparent)]
    Network(#[from] crate::net::NetError),
    /// A bound path lies beneath a directory the sandbox's user may not enter (as root,
    /// bubblewrap runs as nobody and resolves each bind as that user).
    #[error(
        "{what} entry {path} cannot be bound: the sandbox runs as uid {uid} (nobody, since the \
         caller is root), and {dir} is mode {mode:04o}, which it may not enter; let others enter \
         it (chmod o+x {dir}) or bind a path outside it"
    )]
    Unreachable {
        /// Which key the path came from (`ro_paths`, `rw_paths`).
        what: &'static str,
        /// The path, resolved.
        path: String,
        /// The sandbox's uid.
        uid: u32,
        /// The directory above it that uid may not enter.
        dir: String,
        /// That directory's mode.
        mode: u32,
    },
}

/// Runs `spec` inside `walls`. Dropping the future kills the sandbox.
pub async fn run(spec: &Spec, walls: &Walls) -> Result<Outcome, RunError> {
    run_unchecked(spec, walls).await
}

/// `run` for the probe's candidate walls, before the probe has vouched for them.
pub(crate) async fn run_unchecked(spec: &Spec, walls: &Walls) -> Result<Outcome, RunError> {
    let mut resolved = resolve(spec)?;
    reachable_binds(&resolved, walls)?;
    let args = command_line(spec, &resolved, walls);
    let env = environment(spec, &resolved);
    // With network, bubblewrap is started through the helper that makes its namespace.
    let wrapped = crate::net::wrap(spec, walls, args)?;
    let mut command = tokio::process::Command::new(&wrapped.program);
    command
        .args(&wrapped.args)
        .preserved_fds(wrapped.fds)
        // The pinned paths' descriptors, by the numbers on the command line; the command owns
        // them (closed here once it is dropped), bubblewrap closes its copies after binding.
        .preserved_fds(resolved.take_fds())
        // None of ours: bubblewrap passes on exactly the sandbox's environment, which stays
        // off its command line (`bwrap` module).
        .env_clear()
        .envs(env)
        .stdin(if spec.stdin.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some((uid, gid)) = walls.run_as() {
        command.uid(uid).gid(gid);
    }
    let started = Instant::now();
    let mut child = walls
        .spawner
        .spawn(&mut command)
        .map_err(|source| RunError::Spawn {
            bwrap: walls.bwrap().display().to_string(),
            source,
        })?;
    // bubblewrap has its copies: close ours now rather than at the end of the run.
    drop(command);

    let (stop, stopped) = watch::channel(false);
    let cap = spec.max_output_bytes;
    let stdout = child
        .stdout
        .take()
        .map(|r| tokio::spawn(read_capped(r, cap, stopped.clone())));
    let stderr = child
        .stderr
        .take()
        .map(|r| tokio::spawn(read_capped(r, cap, stopped.clone())));
    let feeder = child.stdin.take().map(|mut w| {
        let input = spec.stdin.clone();
        // A program that exits without reading its input closes the pipe: not an error.
        tokio::spawn(async move {
            let _ = w.write_all(&input).await;
        })
    });
    let network = match wrapped.pending.attach(child.id(), walls).await {
        Ok(network) => network,
        Err(e) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            return Err(e.into());
        }
    };

    let timeout = Duration::from_millis(spec.timeout_ms);
    let (exit, timed_out) = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(exit) => (exit.map_err(RunError::Wait)?, false),
        Err(_) => {
            // SIGKILL to bubblewrap: its pid-1 child dies with it (--die-with-parent), and
            // the kernel kills every process of the pid namespace with its init.
            let _ = child.start_kill();
            (child.wait().await.map_err(RunError::Wait)?, true)
        }
    };
    network.finish().await;
    if let Some(feeder) = feeder {
        feeder.abort();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(DRAIN_AFTER_EXIT_MS);
    let stdout = finish(stdout, deadline, &stop).await;
    let stderr = finish(stderr, deadline, &stop).await;
    let wall_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let status = if timed_out {
        Status::TimedOut
    } else {
        status_of(exit)
    };
    Ok(Outcome {
        status,
        stdout,
        stderr,
        wall_ms,
    })
}

/// Refuses, naming it and the fix, a bound path the sandbox's user cannot walk to: bubblewrap
/// would only say "Can't find source path /proc/self/fd/N".
fn reachable_binds(resolved: &crate::spec::Resolved, walls: &Walls) -> Result<(), RunError> {
    let Some((uid, gid)) = walls.run_as() else {
        return Ok(());
    };
    let binds = (resolved.ro_paths.iter().map(|b| ("ro_paths", b)))
        .chain(resolved.rw_paths.iter().map(|b| ("rw_paths", b)))
        .chain(resolved.stages.iter().map(|b| ("overlay_stages", b)));
    for (what, bind) in binds {
        if let Some(blocked) = crate::reach::blocked_above(&bind.source, uid, gid) {
            return Err(RunError::Unreachable {
                what,
                path: bind.source.display().to_string(),
                uid,
                dir: blocked.dir.display().to_string(),
                mode: blocked.mode,
            });
        }
    }
    Ok(())
}

fn status_of(exit: ExitStatus) -> Status {
    match (exit.code(), exit.signal()) {
        (Some(code), _) if code > SIGNAL_EXIT_BASE && code <= SIGNAL_EXIT_BASE + MAX_SIGNAL => {
            Status::Signalled(code - SIGNAL_EXIT_BASE)
        }
        (Some(code), _) => Status::Exited(code),
        (None, Some(signal)) => Status::Signalled(signal),
        (None, None) => Status::Exited(-1),
    }
}

async fn finish(
    reader: Option<JoinHandle<Output>>,
    deadline: tokio::time::Instant,
    stop: &watch::Sender<bool>,
) -> Output {
    let Some(mut reader) = reader else {
        return Output::default();
    };
    match tokio::time::timeout_at(deadline, &mut reader).await {
        Ok(output) => output.unwrap_or_default(),
        Err(_) => {
            tracing::warn!("a sandbox's output pipe stayed open after it ended; stopped reading");
            let _ = stop.send(true);
            reader.await.unwrap_or_default()
        }
    }
}

/// Reads `reader` to its end, keeping the first `cap` bytes and counting the rest, so memory
/// stays flat however much the program writes; `stop` ends the read early.
async fn read_capped<R: AsyncRead + Unpin>(
    mut reader: R,
    cap: usize,
    mut stop: watch::Receiver<bool>,
) -> Output {
    let mut kept = Vec::new();
    let mut total: u64 = 0;
    let mut buf = vec![0u8; READ_CHUNK_BYTES];
    loop {
        let n = tokio::select! {
            read = reader.read(&mut buf) => match read {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            _ = stop.wait_for(|stopped| *stopped) => break,
        };
        total = total.saturating_add(n as u64);
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    Output {
        truncated: total > kept.len() as u64,
        bytes: kept,
        total_bytes: total,
    }
}
