//! The keys of an `exec` grant: which programs it may run and the walls they run in.
//!
//! The rule that matters most: a program that runs other programs (a shell, an interpreter,
//! `env`, `xargs`, ...) turns an allow-list into an allow-all, so naming one in `programs`
//! (by name, or with a glob or path that matches one) is a configuration error unless the
//! grant says `shell = true`, which admits exactly that.

use bxconfig::Problems;
use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The tool these keys belong to.
pub const EXEC_TOOL: &str = "exec";

/// Programs that run other programs: shells, interpreters, and the commands that run their
/// arguments as a command. Matched against a program's file name; a name that starts with
/// one of [`RUNNER_PREFIXES`] counts too (`python3.11`, `perl5.36`).
pub const RUNNERS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "fish",
    "ksh",
    "mksh",
    "pdksh",
    "csh",
    "tcsh",
    "ash",
    "rbash",
    "env",
    "busybox",
    "toybox",
    "python",
    "python2",
    "python3",
    "pypy",
    "pypy3",
    "perl",
    "ruby",
    "irb",
    "node",
    "nodejs",
    "deno",
    "bun",
    "lua",
    "luajit",
    "php",
    "tclsh",
    "wish",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "xargs",
    "nice",
    "nohup",
    "timeout",
    "setsid",
    "stdbuf",
    "sudo",
    "su",
    "doas",
    "chroot",
    "unshare",
    "nsenter",
    "bwrap",
    "script",
    "expect",
    "guile",
    "R",
    "Rscript",
    "julia",
    "osascript",
    "pwsh",
    "powershell",
];

/// Name prefixes of versioned runners (`python3.11`, `perl5.36.0`, `lua5.4`, `php8.2`).
pub const RUNNER_PREFIXES: &[&str] = &["python", "perl", "ruby", "lua", "php", "node", "pypy"];

/// Name prefixes of the dynamic loader (`ld-linux-x86-64.so.2`, `ld-musl-x86_64.so.1`,
/// `ld64.so.2`, `ld.so`): run as a program, it loads any ELF file it is given into its own
/// process, with no exec the kernel could refuse.
pub const LOADER_PREFIXES: &[&str] = &["ld-linux", "ld-musl", "ld64.so", "ld.so"];

/// Names of runners that [`RUNNER_PREFIXES`] and [`LOADER_PREFIXES`] catch, tried against a
/// glob in `programs` as the names in [`RUNNERS`] are.
const VERSIONED_EXAMPLES: &[&str] = &[
    "python3.11",
    "perl5.36",
    "ld.so",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
    "ld-musl-x86_64.so.1",
];

/// The directories a path glob in `programs` is tried against for each runner, so that
/// `/usr/bin/*` is caught as naming `sh` (and the sandbox's `PATH` is among them).
const RUNNER_DIRS: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/local/bin",
    "/usr/local/sbin",
    "/run/current-system/sw/bin",
    // Where the loader lives.
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
];

/// Whether the program file name `name` runs other programs (see [`RUNNERS`]).
pub fn is_runner(name: &str) -> bool {
    RUNNERS.contains(&name)
        || LOADER_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
        || RUNNER_PREFIXES.iter().any(|prefix| {
            name.strip_prefix(prefix).is_some_and(|rest| {
                !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit() || c == '.')
            })
        })
}

/// A `programs` glob compiled as it is matched: `*` never crosses a `/`, so `/usr/bin/*`
/// cannot match `/usr/bin/../../tmp/x`. A glob without `/` matches a program's name, one with
/// `/` its absolute path.
pub fn program_glob(glob: &str) -> Result<GlobMatcher, globset::Error> {
    Ok(GlobBuilder::new(glob)
        .literal_separator(true)
        .build()?
        .compile_matcher())
}

/// The `exec` keys of a grant (all unset on a grant of another tool). Limits left unset take
/// `bxsandbox`'s defaults when the call runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecGrant {
    /// Globs over the program's name (`grep`, `python3*`) or its absolute path
    /// (`/usr/bin/*`): `argv[0]` must match one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<String>,
    /// Whether `argv` may be `["sh", "-c", LINE]`, and whether `programs` may name shells and
    /// interpreters.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shell: bool,
    /// Host directories bound read-write (absolute; each must exist when a call runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rw_paths: Vec<PathBuf>,
    /// Host directories or files bound read-only (absolute; each must exist when a call runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ro_paths: Vec<PathBuf>,
    /// Whether the sandbox shares the host's network; without it only a private loopback.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// Variables set on top of the sandbox's fixed environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The wall-clock limit of a run, and the most a call's `timeout_ms` may ask for
    /// (milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The cap on each of stdout and stderr kept (bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<usize>,
    /// The address-space limit (MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// The process limit inside the sandbox, its own init included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_processes: Option<u64>,
}

impl ExecGrant {
    /// Whether no key is set (a grant of another tool must leave them all unset).
    pub fn is_unset(&self) -> bool {
        self == &ExecGrant::default()
    }

    /// Checks the keys of grant `i` of `tool`.
    pub(super) fn check(&self, i: usize, tool: &str, p: &mut Problems) {
        let key = |name: &str| format!("grants[{i}].{name}");
        if tool != EXEC_TOOL {
            for (name, set) in self.set_keys() {
                p.check(
                    !set,
                    key(name),
                    format!("only exec takes {name}; {tool} cannot be limited by it"),
                );
            }
            return;
        }
        p.check(
            !self.programs.is_empty() || self.shell,
            key("programs"),
            "exec needs at least one program glob (or shell = true): with none, every call \
             would be denied",
        );
        for (j, glob) in self.programs.iter().enumerate() {
            self.check_program(&format!("grants[{i}].programs[{j}]"), glob, p);
        }
        for (j, path) in self.rw_paths.iter().enumerate() {
            p.absolute_path(&format!("grants[{i}].rw_paths[{j}]"), path);
        }
        for (j, path) in self.ro_paths.iter().enumerate() {
            p.absolute_path(&format!("grants[{i}].ro_paths[{j}]"), path);
        }
        for (name, value) in &self.env {
            let ok = !name.is_empty()
                && !name.contains('=')
                && !name.contains('\0')
                && !value.contains('\0');
            p.check(
                ok,
                format!("grants[{i}].env.{name}"),
                "a variable name must be non-empty and hold no '=' or NUL, and its value no NUL",
            );
        }
        for (name, value) in [
            ("timeout_ms", self.timeout_ms),
            ("max_output_bytes", self.max_output_bytes.map(|n| n as u64)),
            ("memory_mb", self.memory_mb),
            ("max_processes", self.max_processes),
        ] {
            if let Some(value) = value {
                p.at_least(&key(name), value, 1);
            }
        }
    }

    /// One `programs` entry: a valid glob, absolute when it holds a `/`, naming no runner
    /// unless `shell = true`.
    fn check_program(&self, key: &str, glob: &str, p: &mut Problems) {
        if glob.trim().is_empty() {
            p.push(key, "must not be empty");
            return;
        }
        if glob.contains('/') && !glob.starts_with('/') {
            p.push(
                key,
                "a program path must be absolute (a glob without '/' matches a name on PATH)",
            );
            return;
        }
        let matcher = match program_glob(glob) {
            Ok(m) => m,
            Err(e) => {
                p.push(key, format!("not a valid glob: {}", e.kind()));
                return;
            }
        };
        if self.shell {
            return;
        }
        let named = RUNNERS.iter().chain(VERSIONED_EXAMPLES).find(|name| {
            matcher.is_match(name)
                || RUNNER_DIRS
                    .iter()
                    .any(|dir| matcher.is_match(format!("{dir}/{name}")))
        });
        if let Some(name) = named {
            p.push(
                key,
                format!(
                    "{glob:?} lets exec run {name}, which runs any program or code it is given \
                     and so walks around programs; set shell = true on this grant to allow \
                     that on purpose, or name the programs one by one"
                ),
            );
        }
    }

    /// Each key and whether it is set.
    fn set_keys(&self) -> [(&'static str, bool); 10] {
        [
            ("programs", !self.programs.is_empty()),
            ("shell", self.shell),
            ("rw_paths", !self.rw_paths.is_empty()),
            ("ro_paths", !self.ro_paths.is_empty()),
            ("network", self.network),
            ("env", !self.env.is_empty()),
            ("timeout_ms", self.timeout_ms.is_some()),
            ("max_output_bytes", self.max_output_bytes.is_some()),
            ("memory_mb", self.memory_mb.is_some()),
            ("max_processes", self.max_processes.is_some()),
        ]
    }
}

/// A bound path (`ro_paths` or `rw_paths`) of any exec grant strictly beneath an `rw_paths`
/// entry of any exec grant (its own or another's) is refused, naming both paths and both
/// grants: a call under the writable one could rename the bound path's parents and plant a
/// symlink in its place. brokerd binds what a path named at start and refuses a call whose
/// path moved (`builtin::exec::binds`), so this is the first wall, not the only one. Paths
/// are compared as written and, where they exist, resolved.
pub(super) fn check_nesting<'a>(
    grants: impl Iterator<Item = (usize, &'a ExecGrant)> + Clone,
    p: &mut Problems,
) {
    let writable: Vec<(usize, usize, &PathBuf)> = grants
        .clone()
        .flat_map(|(i, g)| g.rw_paths.iter().enumerate().map(move |(j, r)| (i, j, r)))
        .collect();
    for (i, grant) in grants {
        let bound = [("ro_paths", &grant.ro_paths), ("rw_paths", &grant.rw_paths)];
        for (key, paths) in bound {
            for (j, path) in paths.iter().enumerate() {
                let Some((k, l, rw)) = writable.iter().find(|(_, _, rw)| beneath(path, rw)) else {
                    continue;
                };
                p.push(
                    format!("grants[{i}].{key}[{j}]"),
                    format!(
                        "{} lies beneath grants[{k}].rw_paths[{l}] ({}), which exec may write: a                          call there could rename its parent and plant a symlink, so that                          grants[{i}] binds the host's / or any other directory; bind paths                          that do not nest in a writable one",
                        path.display(),
                        rw.display()
                    ),
                );
            }
        }
    }
}

/// Whether `path` lies strictly beneath `dir`, as written or as resolved (where both exist).
fn beneath(path: &Path, dir: &Path) -> bool {
    let strictly = |path: &Path, dir: &Path| path != dir && path.starts_with(dir);
    strictly(path, dir)
        || matches!(
            (std::fs::canonicalize(path), std::fs::canonicalize(dir)),
            (Ok(path), Ok(dir)) if strictly(&path, &dir)
        )
}

/// Probes the sandbox from synchronous code (`--check-config`): on a thread of its own with a
/// runtime of its own, so it works inside or outside one. `Err` says why it cannot be made.
pub(super) fn probe_blocking(options: &bxsandbox::ProbeOptions) -> Result<(), String> {
    let options = options.clone();
    let probe = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime to probe the sandbox: {e}"))?;
        runtime
            .block_on(bxsandbox::probe(&options))
            .map(|_| ())
            .map_err(|e| e.reason)
    });
    probe
        .join()
        .unwrap_or_else(|_| Err("the sandbox probe crashed".to_owned()))
}
