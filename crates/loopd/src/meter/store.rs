//! The usage accounts on disk: `<state_dir>/usage/<YYYY-MM-DD>.json`, one file per day holding
//! that day's totals per session, replaced atomically (`session::replace_file`: a temporary
//! file, fsync, rename, fsync of the directory), so a loopd killed at any point finds either
//! the day before a write or after it.

use super::usage::Day;
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The directory of the day files, in the state dir.
pub const USAGE_DIR: &str = "usage";

/// One day's file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DayFile {
    /// The day (`YYYY-MM-DD`); the file's name says the same.
    pub day: String,
    /// The time zone the day was counted in (`[budgets] timezone` when it was written).
    pub timezone: String,
    /// Each session's totals that day.
    pub sessions: Day,
}

/// Why the usage accounts could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    /// A file or the directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A day file is not one.
    #[error("{path} is not a day of usage accounts: {why}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

fn io(path: &Path, source: std::io::Error) -> UsageError {
    UsageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The day a file's name stands for: `YYYY-MM-DD.json`, the date written as loopd writes it.
fn day_of_name(name: &str) -> Option<NaiveDate> {
    let stem = name.strip_suffix(".json")?;
    let day: NaiveDate = stem.parse().ok()?;
    (day.to_string() == stem).then_some(day)
}

/// The path of `day`'s file under `dir`.
pub fn path_of(dir: &Path, day: NaiveDate) -> PathBuf {
    dir.join(format!("{day}.json"))
}

/// Every day file under `dir` (made when missing). A temporary file a crash left is removed;
/// any other name is left alone. A file that cannot be read or parsed, or whose day is not
/// its name's, is an error naming it.
pub fn load(dir: &Path) -> Result<BTreeMap<NaiveDate, Day>, UsageError> {
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let mut days = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if crate::session::is_temp_name(&name) {
            // Only this process writes here, and it has not written yet.
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), error = %e, "cannot remove a stale temporary file");
            }
            continue;
        }
        let Some(day) = day_of_name(&name) else {
            continue;
        };
        let bytes = std::fs::read(&path).map_err(|e| io(&path, e))?;
        let file: DayFile = serde_json::from_slice(&bytes).map_err(|e| UsageError::Corrupt {
            path: path.clone(),
            why: e.to_string(),
        })?;
        if file.day != day.to_string() {
            return Err(UsageError::Corrupt {
                path,
                why: format!("it holds the day {}, not {day}", file.day),
            });
        }
        days.insert(day, file.sessions);
    }
    Ok(days)
}

/// Replaces `day`'s file under `dir` with `sessions`, durably.
pub fn save(dir: &Path, day: NaiveDate, timezone: &str, sessions: Day) -> Result<(), UsageError> {
    let path = path_of(dir, day);
    let file = DayFile {
        day: day.to_string(),
        timezone: timezone.to_string(),
        sessions,
    };
    let bytes = serde_json::to_vec_pretty(&file).map_err(|e| UsageError::Corrupt {
        path: path.clone(),
        why: e.to_string(),
    })?;
    crate::session::replace_file(&path, &bytes).map_err(|e| io(&path, e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use bxcore::SessionId;
    use proto::api::UsageTotals;

    #[test]
    fn a_saved_day_loads_back_and_stale_or_foreign_files_do_not_count() {
        let dir = tempfile::tempdir().unwrap();
        let usage = dir.path().join(USAGE_DIR);
        assert!(load(&usage).unwrap().is_empty(), "made, and empty");
        let day: NaiveDate = "2026-12-01".parse().unwrap();
        let mut sessions = Day::new();
        sessions.insert(
            SessionId::new("a").unwrap(),
            UsageTotals {
                turns: 2,
                generated_tokens: 40,
                ..UsageTotals::default()
            },
        );
        save(&usage, day, "Europe/Berlin", sessions.clone()).unwrap();
        save(&usage, day, "Europe/Berlin", sessions.clone()).unwrap();
        std::fs::write(usage.join("2026-12-02.json.tmp.77"), "{").unwrap();
        std::fs::write(usage.join("notes.txt"), "mine").unwrap();
        std::fs::write(usage.join("2026-1-3.json"), "{").unwrap();
        let loaded = load(&usage).unwrap();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[&day], sessions);
        assert!(!usage.join("2026-12-02.json.tmp.77").exists());
        assert!(usage.join("notes.txt").exists());
    }

    #[test]
    fn a_corrupt_or_misnamed_day_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("2026-12-01.json"), "{\"day\":").unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("2026-12-01.json") && err.contains("not a day of usage"),
            "{err}"
        );

        let dir = tempfile::tempdir().unwrap();
        let day: NaiveDate = "2026-12-01".parse().unwrap();
        save(dir.path(), day, "UTC", Day::new()).unwrap();
        std::fs::rename(path_of(dir.path(), day), dir.path().join("2026-12-05.json")).unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("2026-12-05.json") && err.contains("2026-12-01"),
            "{err}"
        );
    }
}
