//! `[[children]]`: the daemons boxd starts, in order, and how it knows each is ready.

use bxconfig::Problems;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// How boxd knows a child is ready, before it starts the next one. Read from a table with
/// exactly one key: one with both is refused (serde's own enum reading took the last and
/// dropped the other without a word).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ready {
    /// Ready when a GET of this URL answers 200 (`ready = { http = "http://127.0.0.1:8080/health" }`).
    Http(String),
    /// Ready when this Unix socket accepts a connection (`ready = { socket = "PATH" }`).
    Socket(PathBuf),
    /// Ready once it has run this many milliseconds without exiting
    /// (`ready = { running_ms = 2000 }`): for a child that serves nothing boxd could check,
    /// such as chatd, a client of loopd's socket.
    #[serde(rename = "running_ms")]
    Running(u64),
}

/// The keys a `ready` table may have, one of them at a time.
const READY_KINDS: &[&str] = &["http", "socket", "running_ms"];

impl<'de> Deserialize<'de> for Ready {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ready, D::Error> {
        deserializer.deserialize_map(ReadyVisitor)
    }
}

struct ReadyVisitor;

impl<'de> Visitor<'de> for ReadyVisitor {
    type Value = Ready;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(
            "a table with one of `http` (a URL), `socket` (a path) or `running_ms` (milliseconds)",
        )
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ready, A::Error> {
        let mut found = Vec::new();
        // The key is read as text and judged here, so that an unknown one is named at
        // `ready` itself, like the other problems of the table.
        while let Some(kind) = map.next_key::<String>()? {
            found.push(match kind.as_str() {
                "http" => Ready::Http(map.next_value()?),
                "socket" => Ready::Socket(map.next_value()?),
                "running_ms" => Ready::Running(map.next_value()?),
                _ => return Err(de::Error::unknown_variant(&kind, READY_KINDS)),
            });
        }
        match (found.pop(), found.is_empty()) {
            (Some(ready), true) => Ok(ready),
            (Some(_), false) => Err(de::Error::custom(
                "has more than one of `socket`, `http` and `running_ms`: a child is ready by \
                 exactly one of them (`ready = { socket = \"PATH\" }`, `ready = { http = \
                 \"URL\" }` or `ready = { running_ms = 2000 }`)",
            )),
            (None, _) => Err(de::Error::custom(
                "is empty: give exactly one of `socket` (a path), `http` (a URL) or \
                 `running_ms` (milliseconds)",
            )),
        }
    }
}

/// One child daemon. Children start in the order listed, each once the one before is ready
/// (or together with it: `with_previous`), and stop in the reverse order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Child {
    /// The child's name: unique, `[a-z0-9_-]`; its output is tagged with it.
    pub name: String,
    /// The program to run.
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables set for it (`NOTIFY_SOCKET` and `WATCHDOG_*` are never passed on).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The config file the child is given (it must also appear in `args`). boxd checks it
    /// against `config_sha256` before every start and refuses to start the child on a
    /// mismatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_file: Option<PathBuf>,
    /// The pinned sha256 of `config_file`: 64 hex digits. Required with `config_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_sha256: Option<String>,
    /// How boxd knows the child is ready.
    pub ready: Ready,
    /// The longest the child may take to become ready, in milliseconds.
    #[serde(default = "default_start_timeout_ms")]
    pub start_timeout_ms: u64,
    /// How long the child gets after SIGTERM before SIGKILL, in milliseconds.
    #[serde(default = "default_stop_grace_ms")]
    pub stop_grace_ms: u64,
    /// Start this child at the same time as the one before it instead of once that one is
    /// ready: for a child that copes with a late predecessor, as loopd copes with a late
    /// brokerd. The next child without it starts once all of them are ready. Not allowed on
    /// the first child. Default false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub with_previous: bool,
}

/// Default `start_timeout_ms`: one minute.
pub const DEFAULT_START_TIMEOUT_MS: u64 = 60_000;
/// Default `stop_grace_ms`: ten seconds.
pub const DEFAULT_STOP_GRACE_MS: u64 = 10_000;

fn default_start_timeout_ms() -> u64 {
    DEFAULT_START_TIMEOUT_MS
}

fn default_stop_grace_ms() -> u64 {
    DEFAULT_STOP_GRACE_MS
}

impl Child {
    /// Checks this child, the `i`th.
    pub(super) fn check(&self, i: usize, p: &mut Problems) {
        let key = |name: &str| format!("children[{i}].{name}");
        if self.name.is_empty() {
            p.push(key("name"), "must not be empty");
        } else if !self
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            p.push(
                key("name"),
                format!("only a-z, 0-9, _ and - are allowed: {:?}", self.name),
            );
        }
        p.non_empty(&key("command"), &self.command);
        for name in self.env.keys() {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                p.push(key("env"), format!("not a valid variable name: {name:?}"));
            }
        }
        match (&self.config_file, &self.config_sha256) {
            (Some(file), Some(_)) => {
                p.path_non_empty(&key("config_file"), file);
                let path = file.to_string_lossy();
                let passed = self
                    .args
                    .iter()
                    .any(|a| *a == path || a.ends_with(&format!("={path}")));
                p.check(
                    passed,
                    key("config_file"),
                    format!("{path} is not passed in args: the child would not run with the file boxd checked"),
                );
            }
            (Some(_), None) => p.push(
                key("config_sha256"),
                "required with config_file: the sha256 the file must have",
            ),
            (None, Some(_)) => p.push(
                key("config_file"),
                "config_sha256 is set but config_file is not: which file does it pin?",
            ),
            (None, None) => {}
        }
        if let Some(sha) = &self.config_sha256 {
            p.check(
                sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
                key("config_sha256"),
                format!("must be 64 hex digits (sha256sum's output), is {sha:?}"),
            );
        }
        match &self.ready {
            Ready::Http(url) => p.http_url(&key("ready.http"), url),
            Ready::Socket(path) => p.socket_path(&key("ready.socket"), path),
            Ready::Running(ms) => {
                p.at_least(&key("ready.running_ms"), *ms, 1);
                p.check(
                    *ms < self.start_timeout_ms,
                    key("ready.running_ms"),
                    format!(
                        "is {ms}, not below start_timeout_ms ({}): the child could never be \
                         ready in time",
                        self.start_timeout_ms
                    ),
                );
            }
        }
        p.at_least(&key("start_timeout_ms"), self.start_timeout_ms, 1);
        p.check(
            i > 0 || !self.with_previous,
            key("with_previous"),
            "the first child has no child before it to start with",
        );
    }
}
