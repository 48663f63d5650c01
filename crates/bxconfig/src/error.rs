//! What went wrong while loading or checking a config, and where it came from.

use std::fmt;
use std::path::PathBuf;

/// Where the value of a key came from: the layer that set it last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The config file (also used for keys nobody set, which keep their default).
    File(PathBuf),
    /// An environment override, by the variable's name (`LOOPD_LLAMA__URL`).
    Env(String),
    /// A command-line flag, by its name (`--socket`).
    Flag(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "{}", path.display()),
            Origin::Env(var) => write!(f, "environment variable {var}"),
            Origin::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// One thing wrong with one key: a value of the wrong type, an unknown key, or a value that
/// fails a semantic check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyProblem {
    /// The layer that set the key (the file when nothing overrode it).
    pub origin: Origin,
    /// The key, dotted from the top of the config (`llama.timeout_ms`, `grants[0].tool`).
    pub key: String,
    /// Why it is wrong.
    pub message: String,
}

impl fmt::Display for KeyProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}: key {:?}: {}", self.origin, self.key, self.message)
        }
    }
}

/// Why a config could not be loaded or is not valid.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file is missing or unreadable (or not UTF-8).
    #[error("{}: cannot read the config file: {source}", path.display())]
    Read {
        /// The file, as it was given.
        path: PathBuf,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{}: not valid TOML: {message}", path.display())]
    Syntax {
        /// The file, as it was given.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
    /// One or more keys are wrong: unknown, of the wrong type, or failing a check.
    #[error("{}", Lines(problems))]
    Keys {
        /// Every problem found, each naming its origin and key.
        problems: Vec<KeyProblem>,
    },
}

impl ConfigError {
    /// The error as lines for a person, one problem per line.
    pub fn lines(&self) -> Vec<String> {
        match self {
            ConfigError::Keys { problems } => problems.iter().map(ToString::to_string).collect(),
            other => vec![other.to_string()],
        }
    }
}

/// Shows problems one per line.
struct Lines<'a>(&'a [KeyProblem]);

impl fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, problem) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{problem}")?;
        }
        Ok(())
    }
}
