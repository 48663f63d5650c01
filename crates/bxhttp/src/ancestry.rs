//! Whether a process descends from another, walking parents up `/proc`: brokerd refuses its
//! own descendants (its MCP servers, which run as its user) on its socket, and loopd refuses
//! brokerd's descendants the owner's answers to approvals. The walk and its limits are
//! described where brokerd uses it (`brokerd::server::descent`).

/// The most processes walked up from a peer towards init; a longer chain is refused.
pub const ANCESTRY_MAX_PROCESSES: usize = 4_096;

/// Why a process's place in the process tree could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DescentError {
    /// `/proc/<pid>` does not exist (for brokerd): the process exited, or is hidden.
    #[error("process {0} is gone or hidden from this process (/proc/{0})")]
    Gone(u32),
    /// `/proc/<pid>/stat` could not be read or parsed.
    #[error("cannot read /proc/{pid}/stat: {detail}")]
    Unreadable {
        /// The process.
        pid: u32,
        /// What failed.
        detail: String,
    },
    /// The chain of parents is longer than [`ANCESTRY_MAX_PROCESSES`].
    #[error("the parents of process {0} go on past {ANCESTRY_MAX_PROCESSES} processes")]
    TooDeep(u32),
}

/// What the walk reads of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// Its parent: 0 for pid 1, or for a process whose parent lies outside this process's pid
    /// namespace.
    pub parent: u32,
    /// When it started, in clock ticks since boot (`/proc/<pid>/stat`'s `starttime`).
    pub start_ticks: u64,
}

/// Where processes are looked up: `/proc` ([`Procfs`]), or a fake one in tests.
pub trait ProcessTable {
    /// Process `pid`'s parent and start time.
    fn entry(&self, pid: u32) -> Result<Entry, DescentError>;
}

/// The real process table, read from `/proc`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Procfs;

impl ProcessTable for Procfs {
    fn entry(&self, pid: u32) -> Result<Entry, DescentError> {
        let path = format!("/proc/{pid}/stat");
        let text = std::fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => DescentError::Gone(pid),
            _ => DescentError::Unreadable {
                pid,
                detail: e.to_string(),
            },
        })?;
        parse_stat(&text).ok_or_else(|| DescentError::Unreadable {
            pid,
            detail: String::from("not the stat line the kernel writes"),
        })
    }
}

/// The parent and start time in the text of a `/proc/<pid>/stat`: after the command (in
/// parentheses, which may itself hold any bytes, so the last `)` ends it) come the state, the
/// parent (field 4) and, as field 22, the start time.
pub fn parse_stat(text: &[u8]) -> Option<Entry> {
    /// `starttime`'s place among the fields after the command (field 22 of the line).
    const START_AFTER_COMMAND: usize = 19;
    let close = text.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(text.get(close + 1..)?).ok()?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    Some(Entry {
        parent: fields.get(1)?.parse().ok()?,
        start_ticks: fields.get(START_AFTER_COMMAND)?.parse().ok()?,
    })
}

/// The process whose descendants are looked for (brokerd: its MCP servers), as the walk needs
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ancestor {
    /// Its pid.
    pub pid: u32,
    /// Its parent now: a sibling's parent, never a descendant.
    pub parent: u32,
    /// When it started, in clock ticks since boot.
    pub start_ticks: u64,
}

impl Ancestor {
    /// This process, its start time read once from `/proc/self/stat`.
    pub fn this_process() -> Result<Ancestor, DescentError> {
        static START_TICKS: std::sync::OnceLock<Result<u64, DescentError>> =
            std::sync::OnceLock::new();
        let pid = std::process::id();
        let start_ticks = START_TICKS
            .get_or_init(|| Procfs.entry(pid).map(|e| e.start_ticks))
            .clone()?;
        Ok(Ancestor {
            pid,
            parent: nix::unistd::getppid().as_raw().unsigned_abs(),
            start_ticks,
        })
    }

    /// Process `pid` (another process: loopd asks about brokerd), read from `/proc`.
    pub fn process(pid: u32) -> Result<Ancestor, DescentError> {
        let entry = Procfs.entry(pid)?;
        Ok(Ancestor {
            pid,
            parent: entry.parent,
            start_ticks: entry.start_ticks,
        })
    }

    /// Whether `peer` is known not to descend from this ancestor without reading anything: the
    /// ancestor itself or its parent (a parent is alive, so its pid is its own).
    pub fn plainly_not_a_descendant(&self, peer: i32) -> bool {
        u32::try_from(peer).is_ok_and(|peer| peer == self.pid || peer == self.parent)
    }

    /// Whether process `peer` descends from this ancestor (which is not its own descendant).
    /// The walk up from `peer` stops, "no", at pid 1, at the ancestor's parent, or at a process
    /// that started before it; "yes" at a process whose parent is the ancestor.
    pub fn is_ancestor_of(
        &self,
        peer: u32,
        table: &impl ProcessTable,
    ) -> Result<bool, DescentError> {
        self.is_ancestor_within(peer, table, ANCESTRY_MAX_PROCESSES)?
            .ok_or(DescentError::TooDeep(peer))
    }

    /// [`Ancestor::is_ancestor_of`] reading at most `max_processes` processes: `Ok(None)` when
    /// that was not enough to tell.
    pub fn is_ancestor_within(
        &self,
        peer: u32,
        table: &impl ProcessTable,
        max_processes: usize,
    ) -> Result<Option<bool>, DescentError> {
        let mut current = peer;
        for _ in 0..max_processes {
            if current == self.pid || current <= 1 || current == self.parent {
                return Ok(Some(false));
            }
            let entry = table.entry(current)?;
            // Strictly before: a process started in brokerd's own clock tick is walked on.
            if entry.start_ticks < self.start_ticks {
                return Ok(Some(false));
            }
            if entry.parent == self.pid {
                return Ok(Some(true));
            }
            current = entry.parent;
        }
        Ok(None)
    }
}
