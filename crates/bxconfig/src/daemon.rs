//! How every daemon's `main` goes: check a config and exit, or load it, start logging at its
//! level, and run. One place, so the three daemons cannot drift apart in exit codes or in how
//! they report a bad config.

use crate::{ConfigArgs, Loader, LogLevel, Validate, run_check_config};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;
use std::process::ExitCode;

/// Exit code when no config was given.
pub const EXIT_NO_CONFIG: u8 = 2;
/// Exit code for a config that does not load or validate, and for a run that failed.
pub const EXIT_FAILED: u8 = 1;

/// What a daemon binary plugs into [`run_daemon`].
pub struct Daemon<'a, T> {
    /// The binary's name, for messages (`loopd`).
    pub name: &'a str,
    /// A loader for a config file, with the binary's environment prefix and override flags.
    pub loader: &'a dyn Fn(&Path) -> Loader,
    /// The log level a loaded config asks for.
    pub log_level: fn(&T) -> LogLevel,
    /// Starts logging at a level (`"info"`): [`crate::init_log`] with the daemon's name.
    pub init_logging: fn(&str),
}

/// The whole `main` of a daemon: `--check-config FILE` prints the resolved config or the
/// problems; `--config FILE` loads and validates (every problem logged, exit 1), starts logging
/// at the config's level and runs `run` (its error logged, exit 1); neither is exit 2.
pub fn run_daemon<T, E>(
    daemon: &Daemon<'_, T>,
    args: &ConfigArgs,
    run: impl FnOnce(T) -> Result<(), E>,
) -> ExitCode
where
    T: DeserializeOwned + Serialize + Validate,
    E: std::fmt::Display,
{
    if let Some(file) = &args.check_config {
        return run_check_config::<T>(&(daemon.loader)(file));
    }
    let Some(file) = &args.config else {
        (daemon.init_logging)(LogLevel::Info.as_str());
        tracing::error!(
            "no config: start {name} with --config FILE (see config/{name}.toml)",
            name = daemon.name
        );
        return ExitCode::from(EXIT_NO_CONFIG);
    };
    let cfg = match (daemon.loader)(file).load_valid::<T>() {
        Ok(cfg) => cfg,
        Err(e) => {
            (daemon.init_logging)(LogLevel::Info.as_str());
            for line in e.lines() {
                tracing::error!("{line}");
            }
            return ExitCode::from(EXIT_FAILED);
        }
    };
    (daemon.init_logging)((daemon.log_level)(&cfg).as_str());
    match run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}
