//! chatd's state directory (mode 0700): the Matrix session it signed in with
//! (`session.json`), how far it has read the rooms (`sync_token`), the rooms an owner invited it
//! to (`rooms.json`), and the Matrix SDK's own store (`matrix/`: room state and the end-to-end
//! keys, in SQLite). Each file is replaced whole: a temporary file, fsync, rename, fsync of the
//! directory, so a crash leaves the old content or the new, never a half.

use crate::error::ChatError;
use matrix_sdk::authentication::matrix::MatrixSession;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of the state directory: chatd's user alone.
const DIR_MODE: u32 = 0o700;
/// The mode of each file in it.
const FILE_MODE: u32 = 0o600;
/// The largest state file read, in bytes.
const MAX_STATE_FILE_BYTES: u64 = 1024 * 1024;

/// The rooms chatd joined on an owner's invitation: room id → who invited it.
pub type TakenRooms = BTreeMap<String, String>;

/// How far chatd has posted loopd's notifications (`notices`): how many of the list, and the
/// key of the last one.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NoticeCursor {
    /// How many of loopd's list were seen.
    pub seen: usize,
    /// The key of the last one seen (`notices::key_of`).
    pub last: Option<String>,
}

/// chatd's state directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The state directory `dir`, made (0700) when missing; one that others may enter is
    /// refused, since it holds the bot's access token and keys.
    pub fn open(dir: &Path) -> Result<Store, ChatError> {
        let io = |source| ChatError::Io {
            what: "the state directory",
            path: dir.to_path_buf(),
            source,
        };
        DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir)
            .map_err(io)?;
        let mode = std::fs::metadata(dir).map_err(io)?.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(ChatError::Config(format!(
                "the state directory {} has mode {mode:o}: others may enter it, and it holds \
                 the bot's access token and keys; chmod 0700 it",
                dir.display()
            )));
        }
        Ok(Store {
            dir: dir.to_path_buf(),
        })
    }

    /// Where the Matrix SDK keeps its SQLite store.
    pub fn sdk_dir(&self) -> PathBuf {
        self.dir.join("matrix")
    }

    /// The session chatd signed in with, if it has.
    pub fn session(&self) -> Result<Option<MatrixSession>, ChatError> {
        self.read_json("the Matrix session", "session.json")
    }

    /// Keeps the session chatd signed in with.
    pub fn save_session(&self, session: &MatrixSession) -> Result<(), ChatError> {
        self.write_json("the Matrix session", "session.json", session)
    }

    /// Where the rooms were last read to, if they were.
    pub fn sync_token(&self) -> Result<Option<String>, ChatError> {
        let path = self.dir.join("sync_token");
        match read_capped(&path) {
            Ok(bytes) => String::from_utf8(bytes)
                .map(|t| Some(t.trim().to_owned()))
                .map_err(|e| ChatError::Corrupt {
                    what: "the sync position",
                    path,
                    why: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ChatError::Io {
                what: "the sync position",
                path,
                source,
            }),
        }
    }

    /// Keeps where the rooms were read to.
    pub fn save_sync_token(&self, token: &str) -> Result<(), ChatError> {
        self.replace("the sync position", "sync_token", token.as_bytes())
    }

    /// The rooms an owner invited chatd to.
    pub fn taken_rooms(&self) -> Result<TakenRooms, ChatError> {
        Ok(self
            .read_json("the rooms taken", "rooms.json")?
            .unwrap_or_default())
    }

    /// Keeps the rooms an owner invited chatd to.
    pub fn save_taken_rooms(&self, rooms: &TakenRooms) -> Result<(), ChatError> {
        self.write_json("the rooms taken", "rooms.json", rooms)
    }

    /// How far loopd's notifications were posted; none before the first read.
    pub fn notice_cursor(&self) -> Result<Option<NoticeCursor>, ChatError> {
        self.read_json("the notifications posted", "notices.json")
    }

    /// Keeps how far loopd's notifications were posted.
    pub fn save_notice_cursor(&self, cursor: &NoticeCursor) -> Result<(), ChatError> {
        self.write_json("the notifications posted", "notices.json", cursor)
    }

    /// The last message read in each room: room id → event id (`catchup`).
    pub fn marks(&self) -> Result<BTreeMap<String, String>, ChatError> {
        Ok(self
            .read_json("the last messages read", "marks.json")?
            .unwrap_or_default())
    }

    /// Keeps the last message read in each room.
    pub fn save_marks(&self, marks: &BTreeMap<String, String>) -> Result<(), ChatError> {
        self.write_json("the last messages read", "marks.json", marks)
    }

    /// The JSON file `name` (`what` it is, for errors); none when it is missing.
    pub(crate) fn read_json<T: DeserializeOwned>(
        &self,
        what: &'static str,
        name: &str,
    ) -> Result<Option<T>, ChatError> {
        let path = self.dir.join(name);
        let bytes = match read_capped(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ChatError::Io { what, path, source }),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ChatError::Corrupt {
                what,
                path,
                why: e.to_string(),
            })
    }

    /// Replaces the JSON file `name` with `value`.
    pub(crate) fn write_json<T: Serialize>(
        &self,
        what: &'static str,
        name: &str,
        value: &T,
    ) -> Result<(), ChatError> {
        let bytes = serde_json::to_vec_pretty(value).map_err(|e| ChatError::Corrupt {
            what,
            path: self.dir.join(name),
            why: e.to_string(),
        })?;
        self.replace(what, name, &bytes)
    }

    /// Replaces the file `name` with `bytes`: whole, durable, 0600.
    fn replace(&self, what: &'static str, name: &str, bytes: &[u8]) -> Result<(), ChatError> {
        let path = self.dir.join(name);
        let partial = self.dir.join(format!(".{name}.tmp.{}", std::process::id()));
        let io = |source| ChatError::Io {
            what,
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(FILE_MODE)
            .open(&partial)
            .map_err(io)?;
        file.write_all(bytes).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&partial, &path).map_err(io)?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(io)
    }
}

fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    File::open(path)?
        .take(MAX_STATE_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_STATE_FILE_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {MAX_STATE_FILE_BYTES} bytes"
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn state_is_private_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let store = Store::open(&state).unwrap();
        assert_eq!(
            std::fs::metadata(&state).unwrap().permissions().mode() & 0o777,
            DIR_MODE
        );
        assert_eq!(store.sync_token().unwrap(), None);
        store.save_sync_token("s72_1").unwrap();
        let mut rooms = TakenRooms::new();
        rooms.insert("!a:hs".into(), "@owner:hs".into());
        store.save_taken_rooms(&rooms).unwrap();
        let again = Store::open(&state).unwrap();
        assert_eq!(again.sync_token().unwrap().as_deref(), Some("s72_1"));
        assert_eq!(again.taken_rooms().unwrap(), rooms);
        let mode = std::fs::metadata(state.join("sync_token"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, FILE_MODE);
    }

    #[test]
    fn a_state_directory_others_may_enter_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = Store::open(dir.path()).unwrap_err().to_string();
        assert!(err.contains("chmod 0700"), "{err}");
    }

    #[test]
    fn a_state_file_chatd_did_not_write_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s")).unwrap();
        std::fs::write(dir.path().join("s/rooms.json"), "not json").unwrap();
        let err = store.taken_rooms().unwrap_err().to_string();
        assert!(
            err.contains("rooms.json") && err.contains("move it away"),
            "{err}"
        );
    }
}
