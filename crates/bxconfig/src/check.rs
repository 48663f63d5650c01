//! `--check-config`: load, validate, and print the resolved config or what is wrong.

use crate::load::Loader;
use crate::validate::Validate;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::process::ExitCode;

/// What `--check-config` found, before anything is printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckOutcome {
    /// The config is valid: the resolved config as TOML, for stdout.
    Valid(String),
    /// The config is not valid: one line per problem (file or variable or flag, key, why), for
    /// stderr.
    Invalid(Vec<String>),
}

/// Loads and validates the config `loader` describes and says what `--check-config` prints.
pub fn check_config<T>(loader: &Loader) -> CheckOutcome
where
    T: DeserializeOwned + Serialize + Validate,
{
    match loader.resolve_to_toml::<T>() {
        Ok(toml) => CheckOutcome::Valid(format!(
            "# resolved from {} plus any environment overrides and flags\n{toml}",
            loader.file().display()
        )),
        Err(e) => CheckOutcome::Invalid(e.lines()),
    }
}

/// The whole `--check-config` behaviour: prints the resolved config as TOML to stdout and
/// returns exit code 0, or prints every problem to stderr and returns 1.
#[allow(clippy::print_stdout)]
pub fn run_check_config<T>(loader: &Loader) -> ExitCode
where
    T: DeserializeOwned + Serialize + Validate,
{
    match check_config::<T>(loader) {
        CheckOutcome::Valid(toml) => {
            print!("{toml}");
            ExitCode::SUCCESS
        }
        CheckOutcome::Invalid(lines) => {
            for line in lines {
                eprintln!("{line}");
            }
            ExitCode::from(1)
        }
    }
}
