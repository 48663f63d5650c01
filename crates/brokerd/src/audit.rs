//! The audit log: JSON lines about every tool request, appended to `<state_dir>/audit.jsonl`.
//!
//! Each line is an [`AuditRecord`] and is written with one `write(2)` on a file opened for
//! appending. A request gets a `decided` line before anything runs: a denial is the request's
//! only line; an allowed call's `decided` line is written before its tool starts, and a
//! `finished` line with the outcome follows. So a brokerd killed while a tool runs (an
//! `http_fetch` that already reached the outside) leaves the decision and the argument digest
//! behind, and a line that cannot be written stops the call before it runs. Once written, a
//! line is in the kernel and survives brokerd dying. Lines reach the disk (`fdatasync`) in batches: the daemon
//! calls [`AuditLog::sync`] every [`AUDIT_SYNC_INTERVAL_MS`] when lines were written, and at
//! shutdown; a power loss can cost at most that interval of lines.
//!
//! A record never holds the arguments (they may hold private data), only their SHA-256, and
//! never a tool's own message (which may quote them): its `detail` is brokerd's own text.
//!
//! Approvals (`docs/approvals.md`): a call brokerd asks the owner about gets one `decided`
//! line with decision `asked` and the minted `approval` id; the lines of a call that ran under
//! an approval carry its id and `approval_scope`; an approval brokerd refused is a `denied`
//! line with reason `approval_refused` and the id as sent.

use bxcore::{ApprovalId, CallId, DenyReason, Labels, SessionId, Timestamp};
use proto::{ToolRequest, ToolResponse, UndoRequest};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

/// The audit log's file name in the state dir.
pub const AUDIT_FILE: &str = "audit.jsonl";

/// How often the daemon flushes written audit lines to disk, in milliseconds.
pub const AUDIT_SYNC_INTERVAL_MS: u64 = 1_000;

/// The audit log file's mode: brokerd's user only.
pub const AUDIT_FILE_MODE: u32 = 0o600;

/// The `tool` of an undo's audit line.
pub const UNDO_TOOL: &str = "undo";

/// The state dir's mode when brokerd creates it.
pub const STATE_DIR_MODE: u32 = 0o700;

/// Which moment of a request a line records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditEvent {
    /// The decision, written before anything runs: a denial, or an allowed call about to start.
    Decided,
    /// What came of an allowed call. (Lines written before the two events existed recorded only
    /// this, and read as it.)
    Finished,
    /// The owner undid a session's turns (`POST /v1/undo`), written before any file is put
    /// back: `tool` is `undo`, `turn` the first turn undone, `detail` how many files.
    Undo,
}

fn finished() -> AuditEvent {
    AuditEvent::Finished
}

/// What came of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditDecision {
    /// The tool ran and gave a result.
    Allowed,
    /// The broker or the tool refused it.
    Denied,
    /// The tool failed or ran past its time.
    Failed,
    /// The grant asks the owner first: nothing ran, an approval was minted.
    Asked,
}

/// How a call that ran used its approval (`approval_scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalScope {
    /// The owner approved this one call.
    Call,
    /// The owner approved this call and the tool for the rest of the turn: it left a turn
    /// allowance.
    Turn,
    /// The call ran under the turn allowance that approval left; nobody was asked about it.
    Allowance,
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRecord {
    /// When the line was written (RFC 3339, UTC).
    pub time: Timestamp,
    /// Which moment of the request it records.
    #[serde(default = "finished")]
    pub event: AuditEvent,
    /// The calling session.
    pub session: SessionId,
    /// Its turn.
    pub turn: u64,
    /// The call's number in the session.
    pub call: CallId,
    /// The tool asked for.
    pub tool: String,
    /// Hex SHA-256 of the arguments text, exactly as received.
    pub args_sha256: String,
    /// The caller's context label.
    pub context: Labels,
    /// What came of it.
    pub decision: AuditDecision,
    /// Why it was denied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<DenyReason>,
    /// brokerd's own words on the denial or failure (never a tool's text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// From receiving the request to this line, in microseconds.
    pub duration_us: u64,
    /// Bytes of the result content loopd gets (0 when none).
    pub result_bytes: u64,
    /// The label of the result, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Labels>,
    /// Whether the result was cut to the cap.
    pub truncated: bool,
    /// What a tool adds to its lines ([`AuditFacts`]): for `exec`, the argv's digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv_sha256: Option<String>,
    /// For `exec`: how the program ended (`exited with status 0`, `timed out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// The approval of the line: minted (`asked`), refused (`approval_refused`, the id as
    /// sent), or the one the call ran under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalId>,
    /// For a call that ran under an approval: how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_scope: Option<ApprovalScope>,
    /// For a call denied `leak`: the name of the secret it would have carried out (never
    /// the value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leak: Option<String>,
    /// The secrets replaced by `{secret:NAME}` in what the call gave back (names only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redacted: Vec<String>,
}

/// What a tool adds to its audit lines besides the argument digest (see `Tool::audit_facts`
/// in the `tool` module, which depends on this one); never the arguments themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFacts {
    /// Hex SHA-256 of the argv (`exec`).
    pub argv_sha256: Option<String>,
    /// How the program ended (`exec`).
    pub exit: Option<String>,
}

impl AuditRecord {
    /// This line with the approval `id` and, for a call that ran under it, its `scope`.
    pub fn with_approval(self, id: ApprovalId, scope: Option<ApprovalScope>) -> AuditRecord {
        AuditRecord {
            approval: Some(id),
            approval_scope: scope,
            ..self
        }
    }

    /// This line naming `secret`, the secret a call denied `leak` would have carried out.
    pub fn with_leak(self, secret: &str) -> AuditRecord {
        AuditRecord {
            leak: Some(secret.to_string()),
            ..self
        }
    }

    /// This line naming the secrets redacted from the call's result.
    pub fn with_redacted(self, names: Vec<String>) -> AuditRecord {
        AuditRecord {
            redacted: names,
            ..self
        }
    }

    /// This line with `facts` added.
    pub fn with_facts(self, facts: AuditFacts) -> AuditRecord {
        AuditRecord {
            argv_sha256: facts.argv_sha256,
            exit: facts.exit,
            ..self
        }
    }
}

impl AuditRecord {
    /// The `decided` line of an allowed call, written before its tool starts.
    pub fn decided(request: &ToolRequest, started: Instant) -> AuditRecord {
        AuditRecord::line(
            AuditEvent::Decided,
            request,
            AuditDecision::Allowed,
            started,
        )
    }

    /// The line of `response` to `request` at `event`, with brokerd's own `detail`.
    pub fn of_response(
        event: AuditEvent,
        request: &ToolRequest,
        response: &ToolResponse,
        detail: Option<String>,
        started: Instant,
    ) -> AuditRecord {
        let approval = match response {
            ToolResponse::Ask { approval } => Some(approval.id.clone()),
            _ => None,
        };
        let (decision, reason, result_bytes, result, truncated) = match response {
            ToolResponse::Result {
                content,
                class,
                untrusted,
                truncated,
            } => (
                AuditDecision::Allowed,
                None,
                content.len() as u64,
                Some(Labels::new(*class, *untrusted)),
                *truncated,
            ),
            ToolResponse::Denied { reason, labels, .. } => {
                (AuditDecision::Denied, Some(*reason), 0, *labels, false)
            }
            ToolResponse::Failed { labels, .. } => (AuditDecision::Failed, None, 0, *labels, false),
            ToolResponse::Ask { .. } => (AuditDecision::Asked, None, 0, None, false),
        };
        AuditRecord {
            reason,
            detail,
            result_bytes,
            result,
            truncated,
            approval,
            ..AuditRecord::line(event, request, decision, started)
        }
    }

    /// A line about `request` at `event` with `decision`, and nothing more to say.
    /// The line of an undo of `session`'s turns from `from_turn` on, putting back `files`
    /// files (its arguments' digest is the request's).
    pub fn undo(request: &UndoRequest, files: usize, started: Instant) -> AuditRecord {
        let arguments = serde_json::to_string(request).unwrap_or_default();
        let as_call = ToolRequest {
            session: request.session.clone(),
            turn: request.from_turn,
            call: CallId(0),
            tool: UNDO_TOOL.to_owned(),
            arguments,
            context: Labels::PUBLIC,
            counts_for: None,
            approval: None,
        };
        let mut line =
            AuditRecord::line(AuditEvent::Undo, &as_call, AuditDecision::Allowed, started);
        line.detail = Some(format!(
            "undo of turns {} on: {files} file(s) put back",
            request.from_turn
        ));
        line
    }

    fn line(
        event: AuditEvent,
        request: &ToolRequest,
        decision: AuditDecision,
        started: Instant,
    ) -> AuditRecord {
        AuditRecord {
            time: Timestamp::now(),
            event,
            session: request.session.clone(),
            turn: request.turn,
            call: request.call,
            tool: request.tool.clone(),
            args_sha256: args_sha256(&request.arguments),
            context: request.context,
            decision,
            reason: None,
            detail: None,
            duration_us: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            result_bytes: 0,
            result: None,
            truncated: false,
            argv_sha256: None,
            exit: None,
            approval: None,
            approval_scope: None,
            leak: None,
            redacted: Vec::new(),
        }
    }
}

/// Hex SHA-256 of `arguments`.
pub fn args_sha256(arguments: &str) -> String {
    hex::encode(Sha256::digest(arguments.as_bytes()))
}

/// Why the audit log could not be used.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// A file-system step failed.
    #[error("audit log {}: cannot {step}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        step: &'static str,
        /// What failed.
        source: io::Error,
    },
    /// A record could not be written as JSON.
    #[error("audit log: cannot serialise a record: {0}")]
    Json(#[from] serde_json::Error),
}

#[derive(Debug)]
struct Open {
    file: File,
    /// Lines were written since the last sync.
    dirty: bool,
}

/// The append-only audit log of one brokerd.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    open: Mutex<Open>,
}

impl AuditLog {
    /// Opens (creating it, and `state_dir` with mode [`STATE_DIR_MODE`], when missing)
    /// `<state_dir>/audit.jsonl` for appending.
    pub fn open(state_dir: &Path) -> Result<AuditLog, AuditError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(STATE_DIR_MODE)
            .create(state_dir)
            .map_err(|source| AuditError::Io {
                path: state_dir.to_path_buf(),
                step: "create the state dir",
                source,
            })?;
        let path = state_dir.join(AUDIT_FILE);
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(AUDIT_FILE_MODE)
            .open(&path)
            .map_err(|source| AuditError::Io {
                path: path.clone(),
                step: "open for appending",
                source,
            })?;
        Ok(AuditLog {
            path,
            open: Mutex::new(Open { file, dirty: false }),
        })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` as one line, with one write.
    pub fn append(&self, record: &AuditRecord) -> Result<(), AuditError> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.file
            .write_all(&line)
            .map_err(|source| AuditError::Io {
                path: self.path.clone(),
                step: "append a line",
                source,
            })?;
        open.dirty = true;
        Ok(())
    }

    /// Flushes the lines written since the last sync to disk (`fdatasync`); nothing to do when
    /// none were.
    pub fn sync(&self) -> Result<(), AuditError> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if !open.dirty {
            return Ok(());
        }
        open.file.sync_data().map_err(|source| AuditError::Io {
            path: self.path.clone(),
            step: "sync to disk",
            source,
        })?;
        open.dirty = false;
        Ok(())
    }

    /// Every record of the log at `path`, in order (for tests and tools that read it back).
    pub fn read(path: &Path) -> Result<Vec<AuditRecord>, AuditError> {
        let io_error = |step| {
            let path = path.to_path_buf();
            move |source| AuditError::Io { path, step, source }
        };
        let file = File::open(path).map_err(io_error("open for reading"))?;
        let mut records = Vec::new();
        for line in io::BufReader::new(file).lines() {
            let line = line.map_err(io_error("read a line"))?;
            records.push(serde_json::from_str(&line)?);
        }
        Ok(records)
    }
}
