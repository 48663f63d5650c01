//! `--check-config`: load, validate, and print the resolved config or what is wrong.

use crate::load::Loader;
use crate::validate::Validate;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::process::ExitCode;

/// What `--check-config` found, before anything is printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckOutcome {
    /// The config is valid: the resolved config as TOML, for stdout. Its warnings, if any, head
    /// it as comment lines (`# warning: ...`).
    Valid(String),
    /// The config is not valid: one line per problem (file or variable or flag, key, why), for
    /// stderr.
    Invalid(Vec<String>),
}

/// What a warning line starts with, on stderr and as a comment atop the resolved config.
pub const WARNING_PREFIX: &str = "warning: ";

/// What a note line starts with, on stderr and atop the resolved config: a TOML comment, so
/// the resolved config stays valid TOML.
pub const NOTE_PREFIX: &str = "# ";

/// Loads and validates the config `loader` describes and says what `--check-config` prints.
pub fn check_config<T>(loader: &Loader) -> CheckOutcome
where
    T: DeserializeOwned + Serialize + Validate,
{
    match check::<T>(loader) {
        Ok((toml, _, _)) => CheckOutcome::Valid(toml),
        Err(lines) => CheckOutcome::Invalid(lines),
    }
}

/// The text for stdout (a header, the warnings and notes as comments, the resolved config as
/// TOML), the warning lines and the note lines, or the problem lines.
fn check<T>(loader: &Loader) -> Result<(String, Vec<String>, Vec<String>), Vec<String>>
where
    T: DeserializeOwned + Serialize + Validate,
{
    let config: T = loader.load_valid().map_err(|e| e.lines())?;
    let toml = loader.render_toml(&config).map_err(|e| e.lines())?;
    let warnings: Vec<String> = match config.warnings() {
        found if found.is_empty() => Vec::new(),
        found => loader
            .keys_error(found)
            .lines()
            .into_iter()
            .map(|line| format!("{WARNING_PREFIX}{line}"))
            .collect(),
    };
    let mut text = format!(
        "# resolved from {} plus any environment overrides and flags\n",
        loader.file().display()
    );
    for warning in &warnings {
        text.push_str("# ");
        text.push_str(warning);
        text.push('\n');
    }
    let notes: Vec<String> = config
        .notes()
        .into_iter()
        .map(|note| format!("{NOTE_PREFIX}{note}"))
        .collect();
    for note in &notes {
        text.push_str(note);
        text.push('\n');
    }
    text.push_str(&toml);
    Ok((text, warnings, notes))
}

/// The whole `--check-config` behaviour: prints the resolved config as TOML to stdout (its
/// warnings and notes to stderr too) and returns exit code 0, or prints every problem to stderr and
/// returns 1.
#[allow(clippy::print_stdout)]
pub fn run_check_config<T>(loader: &Loader) -> ExitCode
where
    T: DeserializeOwned + Serialize + Validate,
{
    match check::<T>(loader) {
        Ok((toml, warnings, notes)) => {
            for warning in warnings {
                eprintln!("{warning}");
            }
            for note in notes {
                eprintln!("{note}");
            }
            print!("{toml}");
            ExitCode::SUCCESS
        }
        Err(lines) => {
            for line in lines {
                eprintln!("{line}");
            }
            ExitCode::from(1)
        }
    }
}
