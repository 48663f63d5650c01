//! What one sandboxed run is: the program, its input, what it may see and the limits it runs
//! under. The `exec` tool turns a grant plus a call into a `Spec`; `bwrap::command_line` turns
//! a `Spec` into bubblewrap's arguments.

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

/// One run: the program and its arguments, what it may read and write, and its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The program and its arguments; `argv[0]` is looked up on the sandbox's `PATH` when it
    /// holds no `/`. Never a shell line: a shell runs only when `argv` names one.
    pub argv: Vec<String>,
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
    /// Host paths bound read-only at the same path (resolved first; each must exist).
    pub ro_paths: Vec<PathBuf>,
    /// Host paths bound read-write at the same path (resolved first; each must exist).
    pub rw_paths: Vec<PathBuf>,
    /// Whether the sandbox shares the host's network; without it only a private loopback.
    pub network: bool,
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
            cwd: None,
            stdin: Vec::new(),
            env: Vec::new(),
            ro_paths: Vec::new(),
            rw_paths: Vec::new(),
            network: false,
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
    /// A path could not be resolved (it does not exist, or a component cannot be searched).
    #[error("{what} {path}: cannot resolve it: {source}")]
    Resolve {
        /// Which key the path came from.
        what: &'static str,
        /// The path as given.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A path is not valid UTF-8, so it cannot be handed to the shim.
    #[error("{what} {path}: not valid UTF-8")]
    NotUtf8 {
        /// Which key the path came from.
        what: &'static str,
        /// The path as given.
        path: PathBuf,
    },
    /// The working directory lies outside every bound path.
    #[error("cwd {0} lies beneath no ro_paths or rw_paths entry, so it does not exist inside")]
    CwdOutside(PathBuf),
    /// A limit was zero, which would let nothing run.
    #[error("{0} is 0: give a positive limit")]
    ZeroLimit(&'static str),
}

/// A spec with its paths resolved (`canonicalize`: a symlink cannot redirect a bind) and
/// checked.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    pub(crate) ro_paths: Vec<PathBuf>,
    pub(crate) rw_paths: Vec<PathBuf>,
    pub(crate) cwd: PathBuf,
}

/// Checks `spec` and resolves its paths.
pub(crate) fn resolve(spec: &Spec) -> Result<Resolved, SpecError> {
    if spec.argv.first().is_none_or(|p| p.is_empty()) {
        return Err(SpecError::EmptyArgv);
    }
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
    let ro_paths = canonical_all("ro_paths", &spec.ro_paths)?;
    let rw_paths = canonical_all("rw_paths", &spec.rw_paths)?;
    let cwd = match &spec.cwd {
        Some(cwd) => {
            let cwd = canonical("cwd", cwd)?;
            if !ro_paths.iter().chain(&rw_paths).any(|p| cwd.starts_with(p)) {
                return Err(SpecError::CwdOutside(cwd));
            }
            cwd
        }
        None => rw_paths
            .first()
            .cloned()
            .unwrap_or_else(|| PathBuf::from("/tmp")),
    };
    Ok(Resolved {
        ro_paths,
        rw_paths,
        cwd,
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

fn canonical_all(what: &'static str, paths: &[PathBuf]) -> Result<Vec<PathBuf>, SpecError> {
    paths.iter().map(|p| canonical(what, p)).collect()
}

fn canonical(what: &'static str, path: &Path) -> Result<PathBuf, SpecError> {
    let resolved = std::fs::canonicalize(path).map_err(|source| SpecError::Resolve {
        what,
        path: path.to_owned(),
        source,
    })?;
    if resolved.to_str().is_none() {
        return Err(SpecError::NotUtf8 {
            what,
            path: path.to_owned(),
        });
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_missing_path_is_refused_by_name() {
        let mut spec = Spec::new(["true"]);
        spec.rw_paths.push("/nonexistent/bxsandbox".into());
        let err = resolve(&spec).unwrap_err().to_string();
        assert!(
            err.starts_with("rw_paths /nonexistent/bxsandbox: cannot resolve"),
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
