//! The loader: the TOML file, then environment overrides, then command-line flags.

use crate::env::{self, EnvOverride};
use crate::error::{ConfigError, KeyProblem, Origin};
use crate::validate::{Problem, Validate};
use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use figment::value::Value;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// Loads `file`, overridden by this process's `PREFIX_SECTION__KEY` environment variables.
///
/// `env_prefix` is the daemon's (`"LOOPD"`); `LOOPD_LLAMA__URL=...` sets `llama.url`.
pub fn load<T: DeserializeOwned>(file: &Path, env_prefix: &str) -> Result<T, ConfigError> {
    Loader::new(file, env_prefix).process_env().load()
}

/// Like [`load`], with the environment given instead of read from the process (for tests and
/// for callers that filter it).
pub fn load_from<T: DeserializeOwned>(
    file: &Path,
    env_prefix: &str,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<T, ConfigError> {
    Loader::new(file, env_prefix).env(env).load()
}

/// A flag that overrides one key.
#[derive(Debug, Clone)]
struct FlagOverride {
    flag: String,
    key: String,
    value: Result<Value, String>,
}

/// Builds a config from its layers, lowest first: the serde defaults, the TOML file, the
/// environment overrides, the command-line flags. Every error names the layer that set the key.
#[derive(Debug, Clone)]
pub struct Loader {
    file: PathBuf,
    env_prefix: String,
    env: Vec<EnvOverride>,
    flags: Vec<FlagOverride>,
    early: Vec<KeyProblem>,
}

impl Loader {
    /// A loader for `file` whose environment overrides start with `env_prefix` (`"LOOPD"`).
    /// It reads no environment until [`Loader::process_env`] or [`Loader::env`] says so.
    pub fn new(file: impl Into<PathBuf>, env_prefix: &str) -> Loader {
        Loader {
            file: file.into(),
            env_prefix: env_prefix.to_string(),
            env: Vec::new(),
            flags: Vec::new(),
            early: Vec::new(),
        }
    }

    /// Takes the overrides from this process's environment.
    #[must_use]
    pub fn process_env(self) -> Loader {
        let (vars, problems) = env::process_vars(&self.env_prefix);
        let mut loader = self.env(vars);
        loader.early.extend(problems);
        loader
    }

    /// Takes the overrides from `vars` (every variable may be given: only those with the
    /// prefix are used). Replaces any taken before.
    #[must_use]
    pub fn env(mut self, vars: impl IntoIterator<Item = (String, String)>) -> Loader {
        let (found, problems) = env::overrides(&self.env_prefix, vars);
        self.env = found;
        self.early.retain(|p| !matches!(p.origin, Origin::Env(_)));
        self.early.extend(problems);
        self
    }

    /// Sets `key` (dotted: `llama.url`) to `value`, above the file and the environment, as the
    /// command-line flag `flag` (`--llama`) asked. Errors about the key will name the flag.
    #[must_use]
    pub fn flag(mut self, flag: &str, key: &str, value: impl Serialize) -> Loader {
        let value = Value::serialize(value).map_err(|e| e.to_string());
        self.flags.push(FlagOverride {
            flag: flag.to_string(),
            key: key.to_string(),
            value,
        });
        self
    }

    /// The config file this loader reads.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Reads the layers into `T`. Type errors and unknown keys come back as
    /// [`ConfigError::Keys`], each naming its origin and key.
    pub fn load<T: DeserializeOwned>(&self) -> Result<T, ConfigError> {
        let text = std::fs::read_to_string(&self.file).map_err(|source| ConfigError::Read {
            path: self.file.clone(),
            source,
        })?;
        if let Err(e) = toml::from_str::<toml::Table>(&text) {
            return Err(ConfigError::Syntax {
                path: self.file.clone(),
                message: syntax_message(&text, &e),
            });
        }
        let mut problems = self.early.clone();
        let mut figment = Figment::new().merge(Toml::string(&text));
        for o in &self.env {
            figment = figment.merge(Serialized::default(&o.key, o.value.clone()));
        }
        for f in &self.flags {
            match &f.value {
                Ok(value) => figment = figment.merge(Serialized::default(&f.key, value.clone())),
                Err(why) => problems.push(KeyProblem {
                    origin: Origin::Flag(f.flag.clone()),
                    key: f.key.clone(),
                    message: why.clone(),
                }),
            }
        }
        if !problems.is_empty() {
            return Err(ConfigError::Keys { problems });
        }
        figment.extract::<T>().map_err(|error| ConfigError::Keys {
            problems: error.into_iter().map(|e| self.problem_of(&e)).collect(),
        })
    }

    /// Reads the layers into `T` and runs its [`Validate`] checks.
    pub fn load_valid<T: DeserializeOwned + Validate>(&self) -> Result<T, ConfigError> {
        let config: T = self.load()?;
        config
            .validate()
            .map_err(|problems| self.keys_error(problems))?;
        Ok(config)
    }

    /// Loads and validates, then renders the resolved config as TOML.
    pub fn resolve_to_toml<T>(&self) -> Result<String, ConfigError>
    where
        T: DeserializeOwned + Serialize + Validate,
    {
        let config: T = self.load_valid()?;
        self.render_toml(&config)
    }

    /// Renders a loaded config as TOML.
    pub fn render_toml<T: Serialize>(&self, config: &T) -> Result<String, ConfigError> {
        toml::to_string(config).map_err(|e| ConfigError::Keys {
            problems: vec![KeyProblem {
                origin: Origin::File(self.file.clone()),
                key: String::new(),
                message: format!("cannot render the resolved config as TOML: {e}"),
            }],
        })
    }

    /// Turns validation problems into an error naming, for each key, the layer that set it.
    pub fn keys_error(&self, problems: Vec<Problem>) -> ConfigError {
        ConfigError::Keys {
            problems: problems
                .into_iter()
                .map(|p| KeyProblem {
                    origin: self.origin_of(&p.key),
                    key: p.key,
                    message: p.message,
                })
                .collect(),
        }
    }

    /// The layer that set `key` last: a flag, else an environment variable, else the file.
    pub fn origin_of(&self, key: &str) -> Origin {
        if key.is_empty() {
            return Origin::File(self.file.clone());
        }
        if let Some(f) = self.flags.iter().rev().find(|f| related(&f.key, key)) {
            return Origin::Flag(f.flag.clone());
        }
        if let Some(o) = self.env.iter().rev().find(|o| related(&o.key, key)) {
            return Origin::Env(o.var.clone());
        }
        Origin::File(self.file.clone())
    }

    fn problem_of(&self, e: &figment::Error) -> KeyProblem {
        use figment::error::Kind;
        let mut path = e.path.clone();
        let message = match &e.kind {
            Kind::UnknownField(field, expected) => {
                if path.last() != Some(field) {
                    path.push(field.clone());
                }
                if expected.is_empty() {
                    "unknown key (this table takes no keys)".to_string()
                } else {
                    format!("unknown key; expected one of: {}", expected.join(", "))
                }
            }
            Kind::UnknownVariant(found, expected) => {
                // An enum written as a table (`{ tcp = "x" }`) has the variant in its path.
                if path.last() == Some(found) {
                    path.pop();
                }
                format!(
                    "unknown value {found:?}; expected one of: {}",
                    expected.join(", ")
                )
            }
            Kind::MissingField(field) => {
                if path.last().map(String::as_str) != Some(field.as_ref()) {
                    path.push(field.to_string());
                }
                "missing: this key is required".to_string()
            }
            other => other.to_string(),
        };
        let key = render_key(&path);
        KeyProblem {
            origin: self.origin_of(&key),
            key,
            message,
        }
    }
}

/// True when one key is the other or lies inside it (`llama` and `llama.url`).
fn related(a: &str, b: &str) -> bool {
    let inside = |outer: &str, inner: &str| {
        inner.len() > outer.len()
            && inner.starts_with(outer)
            && matches!(inner.as_bytes()[outer.len()], b'.' | b'[')
    };
    a == b || inside(a, b) || inside(b, a)
}

/// `["grants", "0", "tool"]` becomes `grants[0].tool`.
fn render_key(path: &[String]) -> String {
    let mut key = String::new();
    for part in path {
        if !key.is_empty() && !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()) {
            key.push('[');
            key.push_str(part);
            key.push(']');
        } else {
            if !key.is_empty() {
                key.push('.');
            }
            key.push_str(part);
        }
    }
    key
}

/// The TOML parser's message on one line, with the line and column it points at.
fn syntax_message(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim();
    match e.span() {
        Some(span) => {
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_render_with_indices() {
        let path: Vec<String> = ["grants", "0", "tool"].map(String::from).to_vec();
        assert_eq!(render_key(&path), "grants[0].tool");
    }

    #[test]
    fn related_keys() {
        assert!(related("llama", "llama.url"));
        assert!(related("llama.url", "llama"));
        assert!(related("grants", "grants[0].tool"));
        assert!(!related("llama.url", "llama.url_x"));
        assert!(!related("llama.url", "llama.timeout_ms"));
    }
}
