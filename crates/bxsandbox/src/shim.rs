//! The shim: the first program bubblewrap runs inside the sandbox. It sets the rlimits,
//! applies the Landlock ruleset when the probe found Landlock, under `ExecRule::ProgramOnly`
//! installs the seccomp filter that refuses every later exec (`execwall`), and `exec`s the
//! program (the resolved `Config::program`, exactly), so the program starts with every wall
//! up and nothing of the shim left. It never runs a shell.
//!
//! Its command line is `bxsandbox-shim CONFIG_JSON -- ARGV0 ARGS...` (`Config` as JSON), or
//! `bxsandbox-shim --probe`, which prints `landlock_abi=N` (0: none) for `probe`.

use crate::execwall::{self, ExecWallError};
use crate::interp;
use crate::overlay::{self, OverlayError, OverlayMount};
use crate::spec::ExecRule;
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, LandlockStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
};
use nix::sys::resource::{Resource, setrlimit};
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::io::Write;
use std::path::PathBuf;

/// The shim's file name; `probe` looks for it next to the current executable by default.
pub const SHIM_NAME: &str = "bxsandbox-shim";
/// The argument that puts the shim in probe mode.
pub const PROBE_ARG: &str = "--probe";
/// The exit status of the shim when it could not set a wall up (as `env` and container
/// runners use 125): the program did not run.
pub const SHIM_FAILED_EXIT: i32 = 125;
/// The exit status when the program could not be executed (as shells use 126/127).
pub const EXEC_FAILED_EXIT: i32 = 127;
/// The Landlock ABI the ruleset is written for: V5 covers every filesystem right
/// (refer, truncate, ioctl on devices); older kernels get the subset they know.
const RULESET_ABI: ABI = ABI::V5;
/// The ABI whose TCP rights (bind, connect) are denied without `network`.
const NET_ABI: ABI = ABI::V4;

/// What the outer process tells the shim: the limits and the Landlock rules.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The program executed: absolute, resolved on the host (`argv[0]` is passed as given).
    pub program: PathBuf,
    /// Which programs may be executed after it.
    pub exec_rule: ExecRule,
    /// `RLIMIT_AS` (MiB).
    pub memory_mb: u64,
    /// `RLIMIT_NPROC`.
    pub max_processes: u64,
    /// `RLIMIT_CPU` (seconds).
    pub cpu_seconds: u64,
    /// `RLIMIT_FSIZE` (bytes).
    pub file_size_bytes: u64,
    /// Whether the probe found Landlock: then a ruleset that is not enforced stops the run.
    pub landlock: bool,
    /// Whether the network is shared; without it Landlock also denies TCP bind and connect.
    pub network: bool,
    /// Paths read beneath (system dirs, `ro_paths`, the shim, `/proc`); executed beneath
    /// too under `ExecRule::Any`.
    pub read_paths: Vec<PathBuf>,
    /// Paths read and written beneath (`rw_paths`, `/tmp`, `/dev`); executed beneath too
    /// under `ExecRule::Any`.
    pub write_paths: Vec<PathBuf>,
    /// The overlays to mount before anything else (`overlay`); none for most runs.
    #[serde(default)]
    pub overlays: Vec<OverlayMount>,
}

/// Why the shim stopped before the program ran.
#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    /// The command line was not the shim's.
    #[error("usage: {SHIM_NAME} CONFIG_JSON -- PROGRAM [ARGS...] | {SHIM_NAME} {PROBE_ARG}")]
    Usage,
    /// The config was not valid JSON of `Config`.
    #[error("the config is not valid: {0}")]
    Config(#[from] serde_json::Error),
    /// An rlimit could not be set.
    #[error("setting {what}: {source}")]
    Rlimit {
        /// Which limit.
        what: &'static str,
        /// Why.
        source: nix::Error,
    },
    /// The Landlock ruleset could not be made or applied.
    #[error("Landlock: {0}")]
    Landlock(#[from] landlock::RulesetError),
    /// The probe found Landlock but the kernel did not enforce the ruleset.
    #[error("Landlock was found by the probe but the ruleset was not enforced")]
    NotEnforced,
    /// The program could not be executed, or the exec wall could not be set.
    #[error(transparent)]
    Exec(#[from] ExecWallError),
    /// The overlays of the rw paths could not be mounted.
    #[error(transparent)]
    Overlay(#[from] OverlayError),
}

impl ShimError {
    /// The exit status the shim ends with for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            ShimError::Exec(ExecWallError::Exec { .. }) => EXEC_FAILED_EXIT,
            _ => SHIM_FAILED_EXIT,
        }
    }
}

/// The shim's whole life: on success it never returns (the program replaced it).
pub fn main(args: &[String]) -> Result<Infallible, ShimError> {
    match args {
        [_, probe] if probe == PROBE_ARG => {
            let abi = probe_landlock()?;
            let mut out = std::io::stdout();
            // A probe whose answer cannot be written fails the probe, which is right.
            let _ = writeln!(out, "landlock_abi={abi}");
            std::process::exit(0)
        }
        [_, config, dashes, argv @ ..] if dashes == "--" && !argv.is_empty() => {
            let config: Config = serde_json::from_str(config)?;
            if !config.overlays.is_empty() {
                overlay::mount_all(&config.overlays)?;
            }
            set_limits(&config)?;
            if config.landlock {
                apply_landlock(&config)?;
            }
            Ok(execwall::exec(&config.program, argv, config.exec_rule)?)
        }
        _ => Err(ShimError::Usage),
    }
}

fn set_limits(config: &Config) -> Result<(), ShimError> {
    let memory_bytes = config.memory_mb.saturating_mul(1024 * 1024);
    for (what, resource, value) in [
        (
            "RLIMIT_CPU (cpu_seconds)",
            Resource::RLIMIT_CPU,
            config.cpu_seconds,
        ),
        ("RLIMIT_AS (memory_mb)", Resource::RLIMIT_AS, memory_bytes),
        (
            "RLIMIT_NPROC (max_processes)",
            Resource::RLIMIT_NPROC,
            config.max_processes,
        ),
        (
            "RLIMIT_FSIZE (file_size_bytes)",
            Resource::RLIMIT_FSIZE,
            config.file_size_bytes,
        ),
        // A crash leaves no core file in a bound directory.
        ("RLIMIT_CORE", Resource::RLIMIT_CORE, 0),
    ] {
        setrlimit(resource, value, value).map_err(|source| ShimError::Rlimit { what, source })?;
    }
    Ok(())
}

fn apply_landlock(config: &Config) -> Result<(), ShimError> {
    // Under ProgramOnly no directory grants Execute: only the program and the files the
    // kernel opens to run it (its loader, a script's interpreter) do.
    let (exec_rights, exec_files) = match config.exec_rule {
        ExecRule::Any => (AccessFs::Execute.into(), Vec::new()),
        ExecRule::ProgramOnly => (BitFlags::empty(), interp::exec_files(&config.program)),
    };
    let without_execute = |all: BitFlags<AccessFs>| (all & !AccessFs::Execute) | exec_rights;
    let mut ruleset = Ruleset::default().handle_access(AccessFs::from_all(RULESET_ABI))?;
    if !config.network {
        // Handled with no rule: every TCP bind and connect is denied (a second wall behind
        // the empty network namespace).
        ruleset = ruleset.handle_access(AccessNet::from_all(NET_ABI))?;
    }
    let status = ruleset
        .create()?
        .add_rules(path_beneath_rules(
            &config.read_paths,
            without_execute(AccessFs::from_read(RULESET_ABI)),
        ))?
        .add_rules(path_beneath_rules(
            &config.write_paths,
            without_execute(AccessFs::from_all(RULESET_ABI)),
        ))?
        .add_rules(path_beneath_rules(
            &exec_files,
            AccessFs::Execute | AccessFs::ReadFile,
        ))?
        .restrict_self()?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(ShimError::NotEnforced);
    }
    Ok(())
}

/// Applies a ruleset that allows reading everything (it restricts only this probe process)
/// and answers the ABI the kernel enforced it with; 0 when Landlock is absent or disabled.
fn probe_landlock() -> Result<u32, ShimError> {
    let status = Ruleset::default()
        .handle_access(AccessFs::from_read(ABI::V1))?
        .create()?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(ABI::V1)))?
        .restrict_self()?;
    Ok(match status.landlock {
        LandlockStatus::Available { effective_abi, .. }
            if status.ruleset != RulesetStatus::NotEnforced =>
        {
            effective_abi.to_string().parse().unwrap_or(0)
        }
        _ => 0,
    })
}
