//! The KV files on disk: `<dir>/<name>.bin`, written by llama-server (`--slot-save-path`
//! is `dir`), and beside each `<name>.json`, loopd's note of what the file holds (the
//! session's epoch and baseline digest, the model and slot size it was made on, its tokens
//! and bytes, when it was last used). A file without its note, or a note that does not match
//! the session now, is never restored: it is deleted.
//!
//! Every name is `s-` and the SHA-256 (hex) of the session id ([`name_of`]), never the id
//! itself: a client chooses its session ids, and an id spelled like another session's file
//! name would otherwise share (overwrite, delete) that session's file. No id's digest is
//! another id's. A file of any other name (one an older loopd named after the id) is removed
//! at start, never restored.
//!
//! A save goes to `<name>.bin.tmp` first (llama-server writes in place), then is renamed
//! over `<name>.bin`, and only then is the note written (atomically): a crash mid-save leaves
//! the old pair or a stray temporary file, which the next start removes (`clean`); while
//! loopd runs, only whole pairs are ever removed (`list`), so no save in flight is cut.

use bxcore::SessionId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The suffix of a KV file.
pub const KV_SUFFIX: &str = ".bin";
/// The suffix of a save not yet complete.
pub const KV_TEMP_SUFFIX: &str = ".bin.tmp";
/// The suffix of a file's note.
pub const NOTE_SUFFIX: &str = ".json";
/// The largest note read, in bytes.
const MAX_NOTE_BYTES: u64 = 4096;

/// What a KV file holds, as loopd noted it when the file was saved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Note {
    /// The session.
    pub session: SessionId,
    /// The session's epoch when its cache was saved.
    pub epoch: u32,
    /// The SHA-256 (hex) of that epoch's baseline: a prompt with another baseline shares no
    /// prefix worth restoring. Empty when the session's first turn had not written it yet
    /// when the cache was saved (the epoch alone is checked then).
    pub baseline: String,
    /// The model the server reported (`/props`): a cache is never restored into another.
    pub model: String,
    /// The slot size (`n_ctx`) the cache was made in.
    pub n_ctx: u32,
    /// Tokens in the file.
    pub tokens: u64,
    /// Bytes of the file.
    pub bytes: u64,
    /// When it was saved or last restored, in milliseconds since the epoch: least recently
    /// used files go first.
    pub used_ms: u64,
}

/// What every file name (no suffix) starts with.
const NAME_PREFIX: &str = "s-";
/// The hex digits of a name after its prefix: all of a SHA-256's.
const NAME_HEX_DIGITS: usize = 64;

/// The file name (no suffix) for `session`: `s-` and the SHA-256 (64 hex digits) of its id.
/// A digest, whatever the id: a name that is the id (or, for some ids only, a digest) could
/// be taken by a client naming its session as another's file.
pub fn name_of(session: &SessionId) -> String {
    let digest = Sha256::digest(session.as_str().as_bytes());
    format!("{NAME_PREFIX}{}", hex::encode(digest))
}

/// Whether `name` (no suffix) is one [`name_of`] makes: only such files are ever used.
fn is_name(name: &str) -> bool {
    name.strip_prefix(NAME_PREFIX).is_some_and(|digest| {
        digest.len() == NAME_HEX_DIGITS
            && digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The files of one name in a directory.
#[derive(Debug, Clone)]
pub struct Pair {
    /// `<name>.bin`.
    pub kv: PathBuf,
    /// `<name>.bin.tmp`.
    pub temp: PathBuf,
    /// `<name>.json`.
    pub note: PathBuf,
}

impl Pair {
    /// The files of `name` in `dir`.
    pub fn new(dir: &Path, name: &str) -> Pair {
        Pair {
            kv: dir.join(format!("{name}{KV_SUFFIX}")),
            temp: dir.join(format!("{name}{KV_TEMP_SUFFIX}")),
            note: dir.join(format!("{name}{NOTE_SUFFIX}")),
        }
    }

    /// The note, when there is one that can be read.
    pub fn read_note(&self) -> Option<Note> {
        let file = std::fs::File::open(&self.note).ok()?;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_NOTE_BYTES), &mut text)
            .ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes `note` atomically.
    pub fn write_note(&self, note: &Note) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(note).map_err(std::io::Error::other)?;
        crate::session::replace_file(&self.note, &bytes)
    }

    /// Removes the pair and any temporary file (what is not there is fine).
    pub fn remove(&self) {
        for path in [&self.note, &self.kv, &self.temp] {
            if let Err(e) = std::fs::remove_file(path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a KV file");
            }
        }
    }
}

/// Every whole pair in `dir` (a readable note and its `.bin`) of a name [`name_of`] makes,
/// with its note. Read only: a save in flight (its `.bin.tmp`, or its `.bin` before the note)
/// is left alone, so this may run while another slot saves (a status, the prune after a save).
pub fn list(dir: &Path) -> Vec<(Pair, Note)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let file = entry.file_name();
            let name = file.to_str()?.strip_suffix(NOTE_SUFFIX)?;
            if !is_name(name) {
                return None;
            }
            let pair = Pair::new(dir, name);
            let note = pair.read_note()?;
            pair.kv.is_file().then_some((pair, note))
        })
        .collect()
}

/// Removes what a crash left in `dir`: temporary files, a `.bin` without its note, a note
/// without its `.bin`; and every `.bin` and `.json` of a name [`name_of`] does not make (an
/// older loopd's, named after the session id). Only at start, before any save can be in
/// flight.
pub fn clean(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        if file.ends_with(KV_TEMP_SUFFIX) || crate::session::is_temp_name(file) {
            let _ = std::fs::remove_file(entry.path());
            continue;
        }
        let Some(name) = file
            .strip_suffix(NOTE_SUFFIX)
            .or_else(|| file.strip_suffix(KV_SUFFIX))
        else {
            continue;
        };
        let pair = Pair::new(dir, name);
        if !is_name(name) || pair.read_note().is_none() || !pair.kv.is_file() {
            pair.remove();
        }
    }
}

/// The names to remove so that what is left holds at most `max_bytes` and `max_files`: the
/// least recently used first.
pub fn over_limits(mut all: Vec<(Pair, Note)>, max_bytes: u64, max_files: usize) -> Vec<Pair> {
    all.sort_by_key(|(_, note)| note.used_ms);
    let mut bytes: u64 = all.iter().map(|(_, n)| n.bytes).sum();
    let mut files = all.len();
    let mut removed = Vec::new();
    for (pair, note) in all {
        if bytes <= max_bytes && files <= max_files {
            break;
        }
        bytes = bytes.saturating_sub(note.bytes);
        files -= 1;
        removed.push(pair);
    }
    removed
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn note(session: &str, bytes: u64, used_ms: u64) -> Note {
        Note {
            session: SessionId::new(session).unwrap(),
            epoch: 0,
            baseline: "b".into(),
            model: "m".into(),
            n_ctx: 1024,
            tokens: 10,
            bytes,
            used_ms,
        }
    }

    fn put(dir: &Path, n: &Note) -> Pair {
        let pair = Pair::new(dir, &name_of(&n.session));
        std::fs::write(&pair.kv, vec![0u8; n.bytes as usize]).unwrap();
        pair.write_note(n).unwrap();
        pair
    }

    fn id(s: &str) -> SessionId {
        SessionId::new(s).unwrap()
    }

    #[test]
    fn every_name_is_the_digest_of_its_id_which_no_other_id_can_take() {
        let main = name_of(&id("main"));
        assert_eq!(main, format!("s-{}", hex::encode(Sha256::digest(b"main"))));
        assert!(is_name(&main) && main.len() == 66, "{main}");
        // No id is spelled as a file name (66 bytes, longer than any id); and were it, its
        // name would be the digest of that spelling.
        assert!(SessionId::new(&main).is_err());
        assert_ne!(name_of(&id(&main[..64])), main);
        // So does one spelled as the name an older loopd gave an id holding `..`.
        let old = format!("sha-{}", &hex::encode(Sha256::digest(b"a..b"))[..32]);
        assert_ne!(name_of(&id(&old)), name_of(&id("a..b")));
        assert!(!is_name("main") && !is_name(&old) && !is_name(&main.to_uppercase()));
    }

    #[test]
    fn a_file_of_another_name_is_never_listed_and_goes_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let kept = put(dir.path(), &note("main", 10, 1));
        // An older loopd's files, named after the id, with notes that match.
        let mut older = Vec::new();
        for (name, session) in [
            ("main", "main"),
            ("sha-0123456789abcdef0123456789abcdef", "a..b"),
        ] {
            let pair = Pair::new(dir.path(), name);
            std::fs::write(&pair.kv, b"x").unwrap();
            pair.write_note(&note(session, 1, 1)).unwrap();
            older.push(pair);
        }
        let other = dir.path().join("README");
        std::fs::write(&other, b"not ours").unwrap();
        let found = list(dir.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0.kv, kept.kv);
        clean(dir.path());
        for pair in &older {
            assert!(!pair.kv.exists() && !pair.note.exists(), "{pair:?}");
        }
        assert!(kept.kv.exists() && kept.note.exists());
        assert!(other.exists(), "what is not a KV file is left alone");
    }

    #[test]
    fn a_listing_leaves_a_save_in_flight_and_cleaning_removes_what_a_crash_left() {
        let dir = tempfile::tempdir().unwrap();
        let kept = put(dir.path(), &note("a", 10, 1));
        let orphan = Pair::new(dir.path(), &name_of(&id("b")));
        std::fs::write(&orphan.kv, b"x").unwrap();
        let noteless = Pair::new(dir.path(), &name_of(&id("c")));
        noteless.write_note(&note("c", 1, 1)).unwrap();
        let temp = Pair::new(dir.path(), &name_of(&id("d")));
        std::fs::write(&temp.temp, b"x").unwrap();
        let found = list(dir.path());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.session.as_str(), "a");
        assert!(
            orphan.kv.exists() && temp.temp.exists() && noteless.note.exists(),
            "a listing removes nothing: another slot's save may be in flight"
        );
        clean(dir.path());
        assert!(kept.kv.exists() && kept.note.exists());
        assert!(!orphan.kv.exists(), "a file without its note");
        assert!(!noteless.note.exists(), "a note without its file");
        assert!(!temp.temp.exists(), "a save that never finished");
        assert_eq!(list(dir.path()).len(), 1);
    }

    #[test]
    fn the_least_recently_used_go_first_until_both_limits_hold() {
        let dir = tempfile::tempdir().unwrap();
        for (s, bytes, used) in [("old", 50, 1), ("mid", 30, 2), ("new", 40, 3)] {
            put(dir.path(), &note(s, bytes, used));
        }
        let names =
            |pairs: Vec<Pair>| -> Vec<PathBuf> { pairs.into_iter().map(|p| p.kv).collect() };
        let kv = |s: &str| Pair::new(dir.path(), &name_of(&id(s))).kv;
        assert_eq!(names(over_limits(list(dir.path()), 80, 10)), [kv("old")]);
        assert_eq!(
            names(over_limits(list(dir.path()), 1000, 1)),
            [kv("old"), kv("mid")]
        );
        assert!(over_limits(list(dir.path()), 120, 3).is_empty());
    }
}
