//! The pending approvals on disk (issue 33): `<state_dir>/approvals.json`, written whole
//! (a new file, synced, renamed over the old one, the directory synced) each time an approval
//! is minted or used, and read once at start. So a brokerd that restarts while the owner
//! decides still knows the approval the owner is asked about, and a call the owner approves
//! runs; and an approval used is off the disk before its call runs, so a restart cannot make
//! it usable again.
//!
//! Only what an approval is bound to is kept (session, tool, argument digest, and when it was
//! minted, as wall-clock time since a restart has no `Instant` to go by). Used approvals and
//! turn allowances are not: after a restart a replay is refused as unknown rather than as
//! used, and a tool approved for the turn asks again.

use bxcore::{ApprovalId, SessionId};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// The file, in brokerd's state dir.
pub const APPROVALS_FILE: &str = "approvals.json";
/// The file's format version.
pub const APPROVALS_FORMAT_VERSION: u32 = 1;
/// The file's mode: the approvals name sessions and tools, for brokerd alone.
const APPROVALS_FILE_MODE: u32 = 0o600;

/// Why the pending approvals could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot keep the pending approvals in {path}: {step}: {source}")]
pub struct KeptError {
    path: PathBuf,
    step: &'static str,
    #[source]
    source: std::io::Error,
}

/// One pending approval as the file holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeptApproval {
    /// Its id.
    pub id: ApprovalId,
    /// The session of the call it was minted for.
    pub session: SessionId,
    /// The tool.
    pub tool: String,
    /// Hex SHA-256 of the arguments text.
    pub args_sha256: String,
    /// When it was minted, in milliseconds since the Unix epoch.
    pub minted_unix_ms: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    approvals: Vec<KeptApproval>,
}

/// Where the pending approvals are kept.
#[derive(Debug, Clone)]
pub struct Kept {
    path: PathBuf,
}

impl Kept {
    /// The file in `state_dir`.
    pub fn in_dir(state_dir: &Path) -> Kept {
        Kept {
            path: state_dir.join(APPROVALS_FILE),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What the file holds: nothing when there is no file. One that cannot be read or is not
    /// what brokerd writes is logged and read as empty: its approvals are then refused as
    /// unknown, the safe way to lose them (the next write replaces it).
    pub fn load(&self) -> Vec<KeptApproval> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot read the pending approvals; approvals minted before this start are refused");
                return Vec::new();
            }
        };
        match serde_json::from_str::<File>(&text) {
            Ok(file) if file.version == APPROVALS_FORMAT_VERSION => file.approvals,
            Ok(file) => {
                tracing::warn!(path = %self.path.display(), version = file.version, "the pending approvals are of an unknown format version; approvals minted before this start are refused");
                Vec::new()
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "the pending approvals cannot be parsed; approvals minted before this start are refused");
                Vec::new()
            }
        }
    }

    /// Replaces the file with `approvals`, durably: on disk when this returns `Ok`.
    pub fn save(&self, approvals: Vec<KeptApproval>) -> Result<(), KeptError> {
        let failed = |step: &'static str| {
            let path = self.path.clone();
            move |source| KeptError { path, step, source }
        };
        let text = serde_json::to_vec(&File {
            version: APPROVALS_FORMAT_VERSION,
            approvals,
        })
        .map_err(|e| failed("encode")(std::io::Error::other(e)))?;
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let temporary = dir.join(format!("{APPROVALS_FILE}.tmp.{}", std::process::id()));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(APPROVALS_FILE_MODE)
            .open(&temporary)
            .map_err(failed("create a temporary file"))?;
        file.write_all(&text)
            .and_then(|()| file.sync_all())
            .map_err(failed("write the temporary file"))?;
        std::fs::rename(&temporary, &self.path).map_err(failed("rename into place"))?;
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(failed("sync the state dir"))
    }
}

/// Milliseconds since the Unix epoch now (0 for a clock before it).
pub fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
