//! What one sandboxed run is: the program, its input, what it may see and the limits it runs
//! under. The `exec` tool turns a grant plus a call into a `Spec`; `bwrap::command_line` turns
//! a `Spec` into bubblewrap's arguments.

use crate::pin::{PinError, Pinned};
use crate::program::{self, ProgramError};
use serde::{Deserialize, Serialize};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// The default wall-clock limit of a run (milliseconds).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The default cap on each of stdout and stderr kept in memory (bytes).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// The default address-space limit (MiB).
pub const DEFAULT_MEMORY_MB: u64 = 1024;
/// The default limit on processes inside the sandbox, its own init included.
pub const DEFAULT_MAX_PROCESSES: u64 = 64;
/// The default CPU-time limit (seconds of CPU, not of wall clock).
pub const DEFAULT_CPU_SECONDS: u64 = 60;
/// The default limit on the size of one file the program writes (bytes).
pub const DEFAULT_FILE_SIZE_BYTES: u64 = 256 * 1024 * 1024;

/// Which programs may be executed inside the sandbox once it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecRule {
    /// Only `argv[0]`, resolved once: the shim executes exactly that file, then every later
    /// `execve`/`execveat` of the run fails with `EACCES` (a seccomp filter, and where the
    /// kernel has Landlock, the `Execute` right only on that file and its loader). So a
    /// program that runs others (`sort --compress-program`, `find -exec`, `env`, the loader
    /// `ld.so`) runs nothing else. The default.
    #[default]
    ProgramOnly,
    /// Any program the walls let it read: for a run that exists to run a shell.
    Any,
}

/// One run: the program and its arguments, what it may read and write, and its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The program and its arguments; `argv[0]` is looked up on the sandbox's `PATH` when it
    /// holds no `/`, resolved once to an absolute path without symlinks, and that file is
    /// what runs (`argv[0]` itself is passed on as given). Never a shell line: a shell runs
    /// only when `argv` names one.
    pub argv: Vec<String>,
    /// Which programs may be executed once the run started (default: only `argv[0]`).
    pub exec_rule: ExecRule,
    /// The working directory inside the sandbox; it must lie beneath a `ro_paths` or
    /// `rw_paths` entry. `None`: the first `rw_paths` entry, else `/tmp`.
    pub cwd: Option<PathBuf>,
    /// Bytes fed to the program's stdin, which is then closed. Empty: stdin is `/dev/null`.
    pub stdin: Vec<u8>,
    /// Variables set on top of the fixed environment (`PATH`, `HOME`, `LANG`, `TERM`); a name
    /// given here replaces the fixed value. They reach the program through bubblewrap's own
    /// environment, never its command line (which every user can read), so a value may be a
    /// credential.
    pub env: Vec<(String, String)>,
    /// Host paths bound read-only where they resolved when pinned. A run whose path no
    /// longer resolves to the pinned file is refused, and what is bound is the pinned file
    /// itself (see `pin`).
    pub ro_paths: Vec<Pinned>,
    /// Host paths bound read-write, pinned as `ro_paths`.
    pub rw_paths: Vec<Pinned>,
    /// Empty, or one per `rw_paths` entry, in order: a directory (pinned like the paths) that
    /// holds two empty directories, `upper` and `work`, the sandbox's user's own. Each entry
    /// is then mounted through an overlay (`overlay`): the run sees the entry and may write
    /// it, but every write lands in the stage's `upper` and the entry is left as it was.
    pub overlay_stages: Vec<Pinned>,
    /// Whether the sandbox has network: its own namespace, out through slirp4netns, to global
    /// addresses and `networks` only (see `net`); without it only a private loopback.
    pub network: bool,
    /// With `network`: the non-global IPv4 networks it may reach too (a grant's `networks`).
    pub networks: Vec<ipnet::IpNet>,
    /// The wall-clock limit: at it the whole process tree is killed (milliseconds).
    pub timeout_ms: u64,
    /// The cap on each of stdout and stderr kept; the rest is read and counted, not kept.
    pub max_output_bytes: usize,
    /// The address-space limit, `RLIMIT_AS` (MiB).
    pub memory_mb: u64,
    /// The process limit, `RLIMIT_NPROC`, counting the sandbox's own init.
    pub max_processes: u64,
    /// The CPU-time limit, `RLIMIT_CPU` (seconds).
    pub cpu_seconds: u64,
    /// The limit on the size of a file the program writes, `RLIMIT_FSIZE` (bytes).
    pub file_size_bytes: u64,
}

impl Spec {
    /// A spec for `argv` with no paths, no network and the default limits.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Spec {
            argv: argv.into_iter().map(Into::into).collect(),
            exec_rule: ExecRule::ProgramOnly,
            cwd: None,
            stdin: Vec::new(),
            env: Vec::new(),
            ro_paths: Vec::new(),
            rw_paths: Vec::new(),
            overlay_stages: Vec::new(),
            network: false,
            networks: Vec::new(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            memory_mb: DEFAULT_MEMORY_MB,
            max_processes: DEFAULT_MAX_PROCESSES,
            cpu_seconds: DEFAULT_CPU_SECONDS,
            file_size_bytes: DEFAULT_FILE_SIZE_BYTES,
        }
    }
}

/// Why a spec cannot run; each says what was wrong with which value.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// `argv` was empty or its program name empty.
    #[error("argv is empty: name the program to run")]
    EmptyArgv,
    /// A string held a NUL byte, which no argument or variable can carry.
    #[error("{what} holds a NUL byte: {value:?}")]
    Nul {
        /// Which value.
        what: &'static str,
        /// The value.
        value: String,
    },
    /// An environment variable's name was empty or held `=`.
    #[error("env name {0:?} is not a variable name (empty, or holds '=')")]
    EnvName(String),
    /// A bound path no longer names what was pinned, or the cwd cannot be resolved.
    #[error("{what} {source}")]
    Path {
        /// Which key the path came from.
        what: &'static str,
        /// What is wrong with it.
        source: PinError,
    },
    /// `argv[0]` names no program that can run.
    #[error(transparent)]
    Program(#[from] ProgramError),
    /// The working directory lies outside every bound path.
    #[error("cwd {0} lies beneath no ro_paths or rw_paths entry, so it does not exist inside")]
    CwdOutside(PathBuf),
    /// `overlay_stages` was given, but not one per `rw_paths` entry.
    #[error("{stages} overlay stages for {rw} rw_paths entries: give one per entry, or none")]
    Stages {
        /// How many stages.
        stages: usize,
        /// How many entries.
        rw: usize,
    },
    /// A limit was zero, which would let nothing run.
    #[error("{0} is 0: give a positive limit")]
    ZeroLimit(&'static str),
}

/// One pinned path as a run binds it: a duplicate of its descriptor, where it is and where
/// it goes.
#[derive(Debug)]
pub(crate) struct Bind {
    pub(crate) fd: OwnedFd,
    pub(crate) source: PathBuf,
    pub(crate) dest: PathBuf,
}

/// A spec checked, its bound paths still naming what was pinned (their descriptors ready
/// for bubblewrap), its cwd and program resolved.
#[derive(Debug)]
pub(crate) struct Resolved {
    pub(crate) ro_paths: Vec<Bind>,
    pub(crate) rw_paths: Vec<Bind>,
    /// The overlay stages, bound beneath `overlay::STAGE_ROOT`: one per `rw_paths` entry, or
    /// none.
    pub(crate) stages: Vec<Bind>,
    pub(crate) cwd: PathBuf,
    /// The absolute path, without symlinks, the shim executes.
    pub(crate) program: PathBuf,
}

impl Resolved {
    /// Every descriptor, to be handed to bubblewrap (which closes each after its bind).
    pub(crate) fn take_fds(&mut self) -> Vec<OwnedFd> {
        let ro = std::mem::take(&mut self.ro_paths);
        let rw = std::mem::take(&mut self.rw_paths);
        let stages = std::mem::take(&mut self.stages);
        rw.into_iter()
            .chain(ro)
            .chain(stages)
            .map(|b| b.fd)
            .collect()
    }
}

/// Checks `spec`, its pinned paths and resolves its program and cwd.
pub(crate) fn resolve(spec: &Spec) -> Result<Resolved, SpecError> {
    let Some(argv0) = spec.argv.first().filter(|p| !p.is_empty()) else {
        return Err(SpecError::EmptyArgv);
    };
    for arg in &spec.argv {
        no_nul("an argv entry", arg)?;
    }
    for (name, value) in &spec.env {
        if name.is_empty() || name.contains('=') {
            return Err(SpecError::EnvName(name.clone()));
        }
        no_nul("an env name", name)?;
        no_nul("an env value", value)?;
    }
    for (key, value) in [
        ("timeout_ms", spec.timeout_ms),
        ("memory_mb", spec.memory_mb),
        ("max_processes", spec.max_processes),
        ("cpu_seconds", spec.cpu_seconds),
        ("file_size_bytes", spec.file_size_bytes),
    ] {
        if value == 0 {
            return Err(SpecError::ZeroLimit(key));
        }
    }
    let ro_paths = binds("ro_paths", &spec.ro_paths)?;
    let rw_paths = binds("rw_paths", &spec.rw_paths)?;
    let mut stages = binds("overlay_stages", &spec.overlay_stages)?;
    if !stages.is_empty() && stages.len() != rw_paths.len() {
        return Err(SpecError::Stages {
            stages: stages.len(),
            rw: rw_paths.len(),
        });
    }
    for (n, stage) in stages.iter_mut().enumerate() {
        stage.dest = Path::new(crate::overlay::STAGE_ROOT).join(n.to_string());
    }
    let cwd = match &spec.cwd {
        Some(cwd) => {
            let cwd = canonical_cwd(cwd)?;
            if !ro_paths
                .iter()
                .chain(&rw_paths)
                .any(|b| cwd.starts_with(&b.dest))
            {
                return Err(SpecError::CwdOutside(cwd));
            }
            cwd
        }
        None => rw_paths
            .first()
            .map(|b| b.dest.clone())
            .unwrap_or_else(|| PathBuf::from("/tmp")),
    };
    let program = program::resolve(argv0)?;
    Ok(Resolved {
        ro_paths,
        rw_paths,
        stages,
        cwd,
        program,
    })
}

fn no_nul(what: &'static str, value: &str) -> Result<(), SpecError> {
    if value.contains('\0') {
        return Err(SpecError::Nul {
            what,
            value: value.to_owned(),
        });
    }
    Ok(())
}

/// Each pinned path checked (it still names what was pinned) with a duplicate of its
/// descriptor.
fn binds(what: &'static str, paths: &[Pinned]) -> Result<Vec<Bind>, SpecError> {
    paths
        .iter()
        .map(|pinned| {
            pinned
                .check()
                .map_err(|source| SpecError::Path { what, source })?;
            let fd = pinned.descriptor().map_err(|source| SpecError::Path {
                what,
                source: PinError::Open {
                    path: pinned.path().to_owned(),
                    source,
                },
            })?;
            Ok(Bind {
                fd,
                source: pinned.path().to_owned(),
                dest: pinned.path().to_owned(),
            })
        })
        .collect()
}

fn canonical_cwd(path: &Path) -> Result<PathBuf, SpecError> {
    let path_error = |source| SpecError::Path {
        what: "cwd",
        source,
    };
    let resolved = std::fs::canonicalize(path).map_err(|source| {
        path_error(PinError::Resolve {
            path: path.to_owned(),
            source,
        })
    })?;
    if resolved.to_str().is_none() {
        return Err(path_error(PinError::NotUtf8 {
            path: path.to_owned(),
        }));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_bound_path_moved_since_it_was_pinned_is_refused_by_key_and_name() {
        let dir = tempfile::tempdir().unwrap();
        let entry = dir.path().join("entry");
        std::fs::create_dir(&entry).unwrap();
        let mut spec = Spec::new(["true"]);
        spec.ro_paths.push(Pinned::new(&entry).unwrap());
        assert!(resolve(&spec).is_ok());
        std::fs::remove_dir(&entry).unwrap();
        let err = resolve(&spec).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("ro_paths {}: cannot resolve", entry.display())),
            "{err}"
        );
    }

    #[test]
    fn a_cwd_outside_the_binds_is_refused() {
        let mut spec = Spec::new(["true"]);
        spec.cwd = Some("/usr".into());
        assert!(matches!(resolve(&spec), Err(SpecError::CwdOutside(_))));
    }

    #[test]
    fn empty_argv_and_zero_limits_are_refused() {
        assert!(matches!(
            resolve(&Spec::new(Vec::<String>::new())),
            Err(SpecError::EmptyArgv)
        ));
        let mut spec = Spec::new(["true"]);
        spec.max_processes = 0;
        assert_eq!(
            resolve(&spec).unwrap_err().to_string(),
            "max_processes is 0: give a positive limit"
        );
    }
}
