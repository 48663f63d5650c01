//! Semantic checks that types alone cannot express: limits, distinct values, URLs, paths.

use std::fmt::Display;
use std::path::{Component, Path};

/// One semantic problem with one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The key, dotted from the top of the config (`loop.max_steps`, `grants[0].paths[1]`).
    pub key: String,
    /// Why the value is not acceptable.
    pub message: String,
}

impl Problem {
    /// A problem with `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem {
            key: key.into(),
            message: message.into(),
        }
    }
}

/// A config that can check itself beyond what its types say.
pub trait Validate {
    /// Every problem found (not just the first), each naming its key; `Ok` when there is none.
    fn validate(&self) -> Result<(), Vec<Problem>>;

    /// What is worth saying about a valid config but cannot be decided from it alone (a limit
    /// the daemon checks against what it finds at start): `--check-config` prints these as
    /// warnings and still exits 0. None by default.
    fn warnings(&self) -> Vec<Problem> {
        Vec::new()
    }

    /// What `--check-config` shows about a valid config that is neither a problem nor a
    /// warning (loopd: the next run times of its schedules): printed as comment lines
    /// (`# ...`) on stderr and atop the resolved config. None by default.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// The longest path a Unix socket address can hold (`sun_path` is 108 bytes with its NUL).
pub const MAX_SOCKET_PATH_BYTES: usize = 107;

/// Collects problems while a config checks itself, with helpers for the common checks.
#[derive(Debug, Default)]
pub struct Problems {
    found: Vec<Problem>,
}

impl Problems {
    /// No problems yet.
    pub fn new() -> Problems {
        Problems::default()
    }

    /// Records a problem with `key`.
    pub fn push(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.found.push(Problem::new(key, message));
    }

    /// Records a problem with `key` unless `ok`.
    pub fn check(&mut self, ok: bool, key: impl Into<String>, message: impl Into<String>) {
        if !ok {
            self.push(key, message);
        }
    }

    /// `value` must be at least `min`.
    pub fn at_least<N: PartialOrd + Display>(&mut self, key: &str, value: N, min: N) {
        if value < min {
            self.push(key, format!("must be at least {min}, is {value}"));
        }
    }

    /// `value` must be a fraction in (0, 1].
    pub fn fraction(&mut self, key: &str, value: f64) {
        if !(value > 0.0 && value <= 1.0) {
            self.push(key, format!("must be above 0 and at most 1, is {value}"));
        }
    }

    /// `value` must not be empty (or only whitespace).
    pub fn non_empty(&mut self, key: &str, value: &str) {
        if value.trim().is_empty() {
            self.push(key, "must not be empty");
        }
    }

    /// `value` must be an `http://` or `https://` URL with a host.
    pub fn http_url(&mut self, key: &str, value: &str) {
        if let Err(why) = check_http_url(value) {
            self.push(key, why);
        }
    }

    /// `path` must be absolute and without `..` or `.` components.
    pub fn absolute_path(&mut self, key: &str, path: &Path) {
        if !path.is_absolute() {
            self.push(
                key,
                format!(
                    "must be an absolute path, is {:?}",
                    path.display().to_string()
                ),
            );
        } else if path
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        {
            self.push(
                key,
                format!("must not contain `..` or `.`: {}", path.display()),
            );
        }
    }

    /// `path` must be usable as a Unix socket address: not empty, and short enough.
    pub fn socket_path(&mut self, key: &str, path: &Path) {
        let len = path.as_os_str().len();
        if len == 0 {
            self.push(key, "must not be empty");
        } else if len > MAX_SOCKET_PATH_BYTES {
            self.push(
                key,
                format!("a Unix socket path holds at most {MAX_SOCKET_PATH_BYTES} bytes, this one has {len}"),
            );
        }
    }

    /// `path` must not be empty.
    pub fn path_non_empty(&mut self, key: &str, path: &Path) {
        if path.as_os_str().is_empty() {
            self.push(key, "must not be empty");
        }
    }

    /// True when nothing was found so far.
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }

    /// `Ok` when nothing was found, else every problem.
    pub fn finish(self) -> Result<(), Vec<Problem>> {
        if self.found.is_empty() {
            Ok(())
        } else {
            Err(self.found)
        }
    }
}

/// Checks that `value` is an `http://` or `https://` URL with a host; says why not.
pub fn check_http_url(value: &str) -> Result<(), String> {
    let uri: http::Uri = value
        .parse()
        .map_err(|e| format!("not a URL ({e}): {value:?}"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(format!("scheme must be http or https, is {other:?}")),
        None => return Err(format!("must start with http:// or https://: {value:?}")),
    }
    match uri.host() {
        Some(host) if !host.is_empty() => Ok(()),
        _ => Err(format!("has no host: {value:?}")),
    }
}
