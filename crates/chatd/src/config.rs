//! chatd's configuration: the TOML file (`config/chatd.toml`), `CHATD_SECTION__KEY`
//! environment overrides and the command-line flags, loaded with `bxconfig`
//! (`docs/chat.md` lists every key).

use bxconfig::{LogConfig, Problem, Problems, Validate};
use bxcore::{DataClass, SessionId};
use matrix_sdk::ruma::{RoomId, UserId};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The prefix of chatd's environment overrides: `CHATD_MATRIX__HOMESERVER`.
pub const ENV_PREFIX: &str = "CHATD";
/// The variable systemd sets to the directory of a unit's credentials (`LoadCredential=`).
pub const CREDENTIALS_DIRECTORY: &str = "CREDENTIALS_DIRECTORY";
/// The longest a sync request may wait for news on the homeserver, in milliseconds.
pub const MAX_SYNC_TIMEOUT_MS: u64 = 120_000;
/// An ed25519 public key in unpadded base64, in characters.
pub const ED25519_BASE64_CHARS: usize = 43;

/// chatd's whole configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// loopd's socket, as boxctl uses it.
    pub loopd_socket: PathBuf,
    /// Where chatd keeps its Matrix session, sync position and keys (private to its user).
    pub state_dir: PathBuf,
    /// `[log]`: the log level.
    pub log: LogConfig,
    /// `[matrix]`: the homeserver, the bot's account and whom it obeys.
    pub matrix: Matrix,
    /// `[[rooms]]`: rooms whose tasks go to a named session (the others get one each).
    pub rooms: Vec<RoomEntry>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            loopd_socket: PathBuf::from(boxctl::client::DEFAULT_SOCKET),
            state_dir: PathBuf::from("/var/lib/boxmaker/chatd"),
            log: LogConfig::default(),
            matrix: Matrix::default(),
            rooms: Vec::new(),
        }
    }
}

/// `[matrix]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Matrix {
    /// The homeserver's base URL (`https://matrix.example.org`).
    pub homeserver: String,
    /// The bot's own user id (`@box:example.org`).
    pub user: String,
    /// A file holding the bot's password (relative: under `$CREDENTIALS_DIRECTORY`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub password_file: Option<PathBuf>,
    /// A file holding an access token of the bot's, instead of a password (relative: under
    /// `$CREDENTIALS_DIRECTORY`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access_token_file: Option<PathBuf>,
    /// The Matrix ids whose messages become tasks and whose answers count. Everyone else's
    /// never do.
    pub owners: Vec<String>,
    /// The highest data class of an answer posted to a room: an answer labelled above it
    /// stays on the box, and the room is told where to read it.
    pub max_class: DataClass,
    /// How long one sync request waits for news on the homeserver, in milliseconds.
    pub sync_timeout_ms: u64,
    /// The room loopd's notifications go to when their schedule names none (`notify_to`);
    /// none: only those that name a room are posted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notify_room: Option<String>,
    /// `[[matrix.trusted_devices]]`: owners' devices the bot trusts in encrypted rooms, pinned
    /// by their ed25519 key (`trust`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trusted_devices: Vec<TrustedDevice>,
}

/// `[[matrix.trusted_devices]]`: one owner's device, pinned by its key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustedDevice {
    /// The owner (one of `matrix.owners`).
    pub user: String,
    /// The device's id (Element: Settings, Sessions, the session's "Session ID").
    pub device: String,
    /// Its ed25519 key, unpadded base64, spaces allowed (Element: the "Session key").
    pub ed25519: String,
}

impl Default for Matrix {
    fn default() -> Matrix {
        Matrix {
            homeserver: String::new(),
            user: String::new(),
            password_file: None,
            access_token_file: None,
            owners: Vec::new(),
            max_class: DataClass::Private,
            sync_timeout_ms: 30_000,
            notify_room: None,
            trusted_devices: Vec::new(),
        }
    }
}

/// `[[rooms]]`: a room whose tasks run in a named session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoomEntry {
    /// The room's id (`!abc:example.org`).
    pub room: String,
    /// The session its tasks run in.
    pub session: String,
}

/// An ed25519 key as written for people: whitespace left out (Element groups it by four).
pub fn normalise_key(key: &str) -> String {
    key.chars().filter(|c| !c.is_whitespace()).collect()
}

/// How chatd signs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// A password, in this file.
    Password(PathBuf),
    /// An access token, in this file.
    AccessToken(PathBuf),
}

impl Config {
    /// How chatd signs in, its file resolved: a relative path lies under
    /// `$CREDENTIALS_DIRECTORY` (systemd's `LoadCredential=`), which must then be set.
    pub fn credential(&self) -> Result<Credential, String> {
        let credentials = std::env::var_os(CREDENTIALS_DIRECTORY).map(PathBuf::from);
        let resolve = |key: &str, file: &Path| match (file.is_absolute(), &credentials) {
            (true, _) => Ok(file.to_path_buf()),
            (false, Some(dir)) => Ok(dir.join(file)),
            (false, None) => Err(format!(
                "matrix.{key} {} is relative, and ${CREDENTIALS_DIRECTORY} is not set \
                 (give an absolute path, or run under systemd with LoadCredential=)",
                file.display()
            )),
        };
        match (&self.matrix.password_file, &self.matrix.access_token_file) {
            (Some(file), None) => resolve("password_file", file).map(Credential::Password),
            (None, Some(file)) => resolve("access_token_file", file).map(Credential::AccessToken),
            _ => Err("set exactly one of matrix.password_file and matrix.access_token_file".into()),
        }
    }
}

impl Validate for Config {
    fn validate(&self) -> Result<(), Vec<Problem>> {
        let mut p = Problems::new();
        p.socket_path("loopd_socket", &self.loopd_socket);
        p.path_non_empty("state_dir", &self.state_dir);
        p.http_url("matrix.homeserver", &self.matrix.homeserver);
        if let Err(e) = UserId::parse(&self.matrix.user) {
            p.push(
                "matrix.user",
                format!(
                    "{:?} is not a Matrix user id like \"@box:example.org\": {e}",
                    self.matrix.user
                ),
            );
        }
        let credentials = [&self.matrix.password_file, &self.matrix.access_token_file];
        if credentials.iter().filter(|c| c.is_some()).count() != 1 {
            p.push(
                "matrix.password_file",
                "set exactly one of matrix.password_file and matrix.access_token_file",
            );
        }
        if self.matrix.owners.is_empty() {
            p.push(
                "matrix.owners",
                "name at least one owner: no one else's messages ever become tasks",
            );
        }
        for (i, owner) in self.matrix.owners.iter().enumerate() {
            match UserId::parse(owner) {
                Err(e) => p.push(
                    format!("matrix.owners[{i}]"),
                    format!("{owner:?} is not a Matrix user id like \"@me:example.org\": {e}"),
                ),
                Ok(id) if id.as_str() == self.matrix.user => p.push(
                    format!("matrix.owners[{i}]"),
                    "the bot cannot be its own owner",
                ),
                Ok(_) => {}
            }
        }
        p.at_least("matrix.sync_timeout_ms", self.matrix.sync_timeout_ms, 1);
        p.check(
            self.matrix.sync_timeout_ms <= MAX_SYNC_TIMEOUT_MS,
            "matrix.sync_timeout_ms",
            format!("at most {MAX_SYNC_TIMEOUT_MS}"),
        );
        if let Some(Err(e)) = self.matrix.notify_room.as_deref().map(RoomId::parse) {
            p.push(
                "matrix.notify_room",
                format!("is not a room id like \"!abc:example.org\": {e}"),
            );
        }
        for (i, pin) in self.matrix.trusted_devices.iter().enumerate() {
            let key = format!("matrix.trusted_devices[{i}]");
            if !self.matrix.owners.contains(&pin.user) {
                p.push(
                    format!("{key}.user"),
                    format!("{:?} is not one of matrix.owners", pin.user),
                );
            }
            p.non_empty(&format!("{key}.device"), &pin.device);
            let ed25519 = normalise_key(&pin.ed25519);
            let base64 = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/';
            if ed25519.len() != ED25519_BASE64_CHARS || !ed25519.chars().all(base64) {
                p.push(
                    format!("{key}.ed25519"),
                    format!("is not an ed25519 key: {ED25519_BASE64_CHARS} characters of unpadded base64"),
                );
            }
        }
        for (i, entry) in self.rooms.iter().enumerate() {
            let key = format!("rooms[{i}]");
            if let Err(e) = RoomId::parse(&entry.room) {
                p.push(
                    format!("{key}.room"),
                    format!(
                        "{:?} is not a room id like \"!abc:example.org\": {e}",
                        entry.room
                    ),
                );
            }
            if self.rooms[..i].iter().any(|e| e.room == entry.room) {
                p.push(format!("{key}.room"), "this room is listed twice");
            }
            match SessionId::new(&entry.session) {
                Err(e) => p.push(format!("{key}.session"), e.to_string()),
                Ok(id) => {
                    if let Some(why) = proto::api::reserved::reason(&id) {
                        p.push(format!("{key}.session"), why);
                    }
                }
            }
        }
        p.finish()
    }
}

#[cfg(test)]
mod tests;
