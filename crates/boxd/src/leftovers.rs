//! boxd's runtime dir (`runtime_dir`): a lock, so that one boxd at a time uses it, and the
//! record of the children it started, so that what a boxd killed outright left running is
//! killed by the next one before it starts anything.
//!
//! Each child runs in a process group of its own, whose id is the child's pid. The record names
//! each child by pid and start time (`/proc/<pid>/stat`), which together name one process for
//! good: a pid taken by another process since is never touched. At start, boxd kills the
//! process group of every recorded child that still runs, and, when the child itself is gone,
//! what is left of its group (a grandchild with no parent-death signal): a group outlives its
//! leader, and the kernel does not give its id to a new process while the group exists. It
//! waits, bounded, until they are gone, so their sockets are free for the new children.
//!
//! The children's parent-death signal (`exec_child`) covers a crash between a spawn and its
//! record. The record is written to a temporary file and renamed into place, not fsynced: it
//! lives in a tmpfs (`/run`), and after a reboot there is nothing left to kill.

use crate::error::Error;
use crate::procs;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The lock file in the runtime dir: held (`flock`) while boxd runs, let go by the kernel when
/// boxd dies however it dies.
pub const LOCK_FILE: &str = "boxd.lock";
/// The record of the children, in the runtime dir.
pub const RECORD_FILE: &str = "boxd-children.json";
/// The longest boxd waits for the leftovers it killed to be gone, in milliseconds.
pub const LEFTOVER_EXIT_TIMEOUT_MS: u64 = 5_000;
/// How often boxd looks whether they are gone, in milliseconds.
pub const LEFTOVER_POLL_MS: u64 = 20;

/// One child in the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    /// Its name in the config.
    name: String,
    /// Its pid, which is also its process group's id.
    pid: i32,
    /// Its start time, in clock ticks since boot.
    start_ticks: u64,
}

/// The record file's content.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    children: Vec<Entry>,
}

/// The runtime dir, taken by this boxd.
#[derive(Debug)]
pub struct RuntimeDir {
    dir: PathBuf,
    _lock: Flock<File>,
    record: Record,
}

impl RuntimeDir {
    /// Takes `dir` for this boxd: creates it when missing, locks it (failing when another boxd
    /// holds it), and kills what the boxd before left running.
    pub async fn take(dir: &Path) -> Result<RuntimeDir, Error> {
        let fail = |what: &str| {
            let what = what.to_string();
            move |source| Error::RuntimeDir {
                dir: dir.to_path_buf(),
                what,
                source,
            }
        };
        std::fs::create_dir_all(dir).map_err(fail("cannot create it"))?;
        let lock_path = dir.join(LOCK_FILE);
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(fail(&format!("cannot open {}", lock_path.display())))?;
        let lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((_, Errno::EWOULDBLOCK)) => {
                return Err(Error::AlreadyRunning {
                    dir: dir.to_path_buf(),
                    lock: lock_path,
                });
            }
            Err((_, errno)) => {
                return Err(fail(&format!("cannot lock {}", lock_path.display()))(
                    errno.into(),
                ));
            }
        };
        let taken = RuntimeDir {
            dir: dir.to_path_buf(),
            _lock: lock,
            record: Record::default(),
        };
        for entry in taken.read() {
            kill_leftover(&entry).await;
        }
        taken.write();
        Ok(taken)
    }

    /// The record file's path.
    fn record_path(&self) -> PathBuf {
        self.dir.join(RECORD_FILE)
    }

    /// The children the last boxd recorded (none when there is no record; a record that cannot
    /// be read is said in the log, since its leftovers then cannot be found).
    fn read(&self) -> Vec<Entry> {
        let path = self.record_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => {
                tracing::warn!(file = %path.display(), "cannot read the record of the last boxd's children, so what it left running is not killed: {e}");
                return Vec::new();
            }
        };
        match serde_json::from_str::<Record>(&text) {
            Ok(record) => record.children,
            Err(e) => {
                tracing::warn!(file = %path.display(), "the record of the last boxd's children is not valid, so what it left running is not killed: {e}");
                Vec::new()
            }
        }
    }

    /// Writes the record (a temporary file renamed into place). A failure is logged: the
    /// children still die with boxd, only leftovers of their own would not be found.
    fn write(&self) {
        let path = self.record_path();
        let tmp = self.dir.join(format!("{RECORD_FILE}.tmp"));
        let written = serde_json::to_vec(&self.record)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            tracing::warn!(file = %path.display(), "cannot write the record of the children: {e}");
        }
    }

    /// Records child `name`, just started as `pid` at `start_ticks`; forgets children that
    /// no longer run (their group was killed when they were reaped).
    pub fn add(&mut self, name: &str, pid: u32, start_ticks: u64) {
        let Ok(pid) = i32::try_from(pid) else {
            return;
        };
        self.record
            .children
            .retain(|e| procs::stat(e.pid).is_some_and(|s| s.start_ticks == e.start_ticks));
        self.record.children.push(Entry {
            name: name.to_string(),
            pid,
            start_ticks,
        });
        self.write();
    }

    /// Removes the record: every child has been stopped.
    pub fn clear(&mut self) {
        self.record.children.clear();
        let path = self.record_path();
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(file = %path.display(), "cannot remove the record of the children: {e}");
        }
    }
}

/// Kills what is left of the recorded child `e`: its process group, when it still runs or
/// when its group outlived it; waits, bounded, until they are gone.
async fn kill_leftover(e: &Entry) {
    if let Some(s) = procs::stat(e.pid)
        && s.start_ticks != e.start_ticks
    {
        tracing::info!(child = %e.name, pid = e.pid, "the recorded pid is another process's now: left alone");
        return;
    }
    let left = |e: &Entry| -> Vec<i32> {
        match procs::group_members(e.pid) {
            // A member of the child's group started with it or after it.
            Ok(members) => members
                .into_iter()
                .filter(|(_, start)| *start >= e.start_ticks)
                .map(|(pid, _)| pid)
                .collect(),
            Err(err) => {
                tracing::warn!(child = %e.name, pid = e.pid, "cannot look for leftovers: {err}");
                Vec::new()
            }
        }
    };
    let pids = left(e);
    if pids.is_empty() {
        return;
    }
    match killpg(Pid::from_raw(e.pid), Signal::SIGKILL) {
        Ok(()) => {
            tracing::warn!(child = %e.name, pid = e.pid, processes = ?pids, "killed a leftover of an earlier boxd (the child's process group)");
        }
        Err(err) => {
            tracing::warn!(child = %e.name, pid = e.pid, processes = ?pids, "cannot kill a leftover of an earlier boxd: {err}");
            return;
        }
    }
    let deadline = Instant::now() + Duration::from_millis(LEFTOVER_EXIT_TIMEOUT_MS);
    while !left(e).is_empty() {
        if Instant::now() >= deadline {
            tracing::warn!(child = %e.name, pid = e.pid, timeout_ms = LEFTOVER_EXIT_TIMEOUT_MS, "leftovers still run after SIGKILL");
            return;
        }
        tokio::time::sleep(Duration::from_millis(LEFTOVER_POLL_MS)).await;
    }
}
