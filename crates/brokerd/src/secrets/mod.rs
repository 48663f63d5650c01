//! The secrets brokerd holds (`[[secrets]]`, `docs/secrets.md`): read at start and on SIGHUP,
//! attached to the calls a grant names (`{secret:NAME}` in a grant's `headers` or `env`, an
//! `[[mcp]]` server's `env`), looked for in everything that goes out ([`Guard::find`]) and
//! redacted from everything that comes back ([`Guard::redact`]).
//!
//! Invariant: a value never leaves this module except into the request or process a grant
//! attaches it to. [`Secrets`]' `Debug` shows names only; errors name the secret and its file.

pub mod encodings;
pub mod guard;
pub mod load;
pub mod template;

pub use guard::{Guard, Redacted};
pub use load::{CREDENTIALS_DIRECTORY, SecretError};
pub use template::{MissingSecret, Template, TemplateError};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::{Arc, PoisonError, RwLock};

/// One secret: a name grants use as `{secret:NAME}`, and where its value is read from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretConfig {
    /// The name: `[a-z0-9_]`, unique. Also the systemd credential's name when `file` is unset.
    pub name: String,
    /// The file holding the value (absolute; neither world-readable nor world-writable). None: the systemd
    /// credential `$CREDENTIALS_DIRECTORY/<name>` (`LoadCredential=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

/// How many values a reload replaced the guard keeps looking for, newest first: an MCP
/// server started before the reload still holds its old value (and can echo it), and an old
/// value may still be live where it was issued.
pub const MAX_RETIRED_VALUES: usize = 64;

/// The secret values brokerd holds, and the guard made of them (which also knows the values
/// reloads replaced: [`MAX_RETIRED_VALUES`]).
#[derive(Clone, Default)]
pub struct Secrets {
    values: BTreeMap<String, String>,
    /// `(name, value)` of values replaced by reloads in this process, newest first.
    retired: Vec<(String, String)>,
    guard: Guard,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Secrets {
    /// Secrets from `(name, value)` pairs, for tests. A set whose guard cannot be built (only
    /// absurd sizes) comes back empty; brokerd itself reads files with [`SecretStore::load`],
    /// which says why.
    pub fn from_values<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Secrets {
        let values: BTreeMap<String, String> = pairs
            .into_iter()
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        Secrets::build(values).unwrap_or_default()
    }

    /// Secrets from `values`, by name, with their guard.
    pub fn build(values: BTreeMap<String, String>) -> Result<Secrets, SecretError> {
        Secrets::with_retired(values, Vec::new())
    }

    /// Secrets from `values`, whose guard also looks for `retired` values (redacted and
    /// refused under their secret's name, never attached).
    fn with_retired(
        values: BTreeMap<String, String>,
        mut retired: Vec<(String, String)>,
    ) -> Result<Secrets, SecretError> {
        retired.retain(|(name, value)| values.get(name) != Some(value));
        retired.truncate(MAX_RETIRED_VALUES);
        let current = values.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        let old = retired.iter().map(|(n, v)| (n.as_str(), v.as_str()));
        let guard = Guard::new(current.chain(old))?;
        Ok(Secrets {
            values,
            retired,
            guard,
        })
    }

    /// Secrets of `values` after a reload of `self`: what changed joins the retired values.
    fn replaced_by(&self, values: BTreeMap<String, String>) -> Result<Secrets, SecretError> {
        let mut retired: Vec<(String, String)> = self
            .values
            .iter()
            .filter(|(name, value)| values.get(*name) != Some(*value))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        for old in &self.retired {
            if !retired.contains(old) {
                retired.push(old.clone());
            }
        }
        Secrets::with_retired(values, retired)
    }

    /// The value of the secret `name`.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    /// The names held, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The guard over every value held.
    pub fn guard(&self) -> &Guard {
        &self.guard
    }
}

/// The secrets of a running brokerd: one set, replaced whole by a reload, so a call sees
/// either the old values or the new ones, never a mix.
#[derive(Debug, Clone, Default)]
pub struct SecretStore {
    current: Arc<RwLock<Arc<Secrets>>>,
}

impl SecretStore {
    /// A store holding `secrets` (tests, and brokerd without `[[secrets]]`).
    pub fn new(secrets: Secrets) -> SecretStore {
        SecretStore {
            current: Arc::new(RwLock::new(Arc::new(secrets))),
        }
    }

    /// Reads every secret `configs` names, `credentials` being `$CREDENTIALS_DIRECTORY`.
    /// Any that cannot be read is an error: brokerd does not start without its secrets.
    pub fn load(
        configs: &[SecretConfig],
        credentials: Option<&Path>,
    ) -> Result<SecretStore, Vec<SecretError>> {
        let (values, errors) = read_all(configs, credentials, &BTreeMap::new());
        if !errors.is_empty() {
            return Err(errors);
        }
        Secrets::build(values)
            .map(SecretStore::new)
            .map_err(|e| vec![e])
    }

    /// Reads every secret again (SIGHUP). A secret that cannot be read now keeps the value it
    /// had, and its error is returned for the log; the rest take their new values.
    pub fn reload(&self, configs: &[SecretConfig], credentials: Option<&Path>) -> Vec<SecretError> {
        let old = self.current();
        let (values, mut errors) = read_all(configs, credentials, &old.values);
        match old.replaced_by(values) {
            Ok(secrets) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(secrets)
            }
            Err(e) => errors.push(e),
        }
        errors
    }

    /// The secrets now.
    pub fn current(&self) -> Arc<Secrets> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Reads each of `configs`; one that fails keeps its value in `fallback`, if it has one.
fn read_all(
    configs: &[SecretConfig],
    credentials: Option<&Path>,
    fallback: &BTreeMap<String, String>,
) -> (BTreeMap<String, String>, Vec<SecretError>) {
    let mut values = BTreeMap::new();
    let mut errors = Vec::new();
    for config in configs {
        match load::read(config, credentials) {
            Ok(value) => {
                values.insert(config.name.clone(), value);
            }
            Err(e) => {
                if let Some(old) = fallback.get(&config.name) {
                    values.insert(config.name.clone(), old.clone());
                }
                errors.push(e);
            }
        }
    }
    (values, errors)
}

#[cfg(test)]
mod tests;
