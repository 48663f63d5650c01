//! The file tools: [`ReadFile`], [`ListDir`] and [`WriteFile`].
//!
//! Every path argument must be absolute and, resolved with its symlinks and `..`, lie under one
//! of the grant's `paths` roots (see [`paths`]); anything else is
//! [`ToolError::PathNotAllowed`]. Their results are the owner's data: the grant defaults label
//! them private (see `GrantDefaults`). The file work runs on tokio's blocking pool, bounded by
//! the call's `timeout_ms`.
//!
//! Security notes (also in `docs/config.md`, `[[grants]]`):
//! - **Checked once, opened beneath the root.** The check resolves the path; the open then goes
//!   through a directory fd of the root, opened once per call, with `openat2(RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)` (or an `O_NOFOLLOW` walk where `openat2` is
//!   missing), and all else is done on the fds it gives: a directory swapped for a symlink
//!   after the check is `PathNotAllowed`, never followed ([`beneath`]).
//! - **Symlinks** inside a root that point inside it are followed, as the check resolves them;
//!   one that leads out is `PathNotAllowed`. `list_dir` lists a symlink as itself.
//! - **Hard links:** `read_file` refuses a regular file with more than one link, since its other
//!   names may lie outside the roots ([`read`]).
//! - **Writes** never keep setuid, setgid or sticky bits, and leave no second link ([`write`]).

pub(crate) mod args;
pub(crate) mod beneath;
pub(crate) mod paths;
pub(crate) mod read;
pub(crate) mod text;
pub mod undo;
pub(crate) mod write;

use crate::tool::{CallContext, CallFuture, Tool, ToolError, ToolOutput};
use args::{Kind, Param};
use proto::ToolSchema;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most bytes of `content` one `write_file` call may write (1 MiB).
pub const MAX_WRITE_BYTES: usize = 1024 * 1024;

/// The most directory entries `list_dir` reads; a directory with more is listed truncated.
pub const MAX_LIST_ENTRIES: usize = 10_000;

/// The `path` parameter, as every file tool takes it.
const fn path_param(description: &'static str) -> Param {
    Param {
        name: "path",
        kind: Kind::String,
        required: true,
        description,
    }
}

const READ_FILE_PARAMS: [Param; 1] = [path_param("Absolute path of the file.")];

const LIST_DIR_PARAMS: [Param; 1] = [path_param("Absolute path of the directory.")];

const WRITE_FILE_PARAMS: [Param; 3] = [
    path_param("Absolute path of the file; its directory must exist."),
    Param {
        name: "content",
        kind: Kind::String,
        required: true,
        description: "The file's whole content (text).",
    },
    Param {
        name: "overwrite",
        kind: Kind::Bool,
        required: false,
        description: "Replace the file if it exists. Default: false.",
    },
];

/// `read_file {path}`: a text file's contents.
///
/// The file is read up to the call's `result_cap_bytes` (never whole when it is larger), as
/// UTF-8 with invalid bytes shown as U+FFFD, and cut on a character boundary (`truncated`).
/// A missing path, a directory or anything but a regular file is `Failed`; a file with more than
/// one hard link is `PathNotAllowed` (its other names may lie outside the roots).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

impl Tool for ReadFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "read_file".to_string(),
            description: "Read a text file. A long one is cut and marked truncated.".to_string(),
            parameters: args::schema(&READ_FILE_PARAMS),
        }
    }

    fn check(&self, arguments: &serde_json::Value, ctx: CallContext<'_>) -> Result<(), ToolError> {
        let args = args::check(arguments, &READ_FILE_PARAMS)?;
        beneath_a_root(args.str("path").unwrap_or_default(), ctx)
    }

    fn call<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        ctx: CallContext<'a>,
    ) -> CallFuture<'a> {
        Box::pin(async move {
            let args = args::check(arguments, &READ_FILE_PARAMS)?;
            let arg = paths::absolute(args.str("path").unwrap_or_default())?;
            let roots = ctx.grant.paths.clone();
            let cap = ctx.result_cap_bytes;
            blocking("read_file", ctx.timeout_ms, move || {
                read::read_file(&arg, &roots, cap)
            })
            .await
        })
    }
}

/// `list_dir {path}`: a directory's entries.
///
/// One entry per line, sorted by name, each line ended by `\n`; a subdirectory has a trailing
/// `/` (a symlink is listed as itself, without following it). A name with control characters is
/// quoted and escaped, so it cannot forge other lines. An empty directory gives empty content.
/// At most [`MAX_LIST_ENTRIES`] entries are read, and only whole lines up to the result cap are
/// kept; either limit marks the result `truncated`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

impl Tool for ListDir {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "list_dir".to_string(),
            description: "List a directory: one entry a line, sorted; a subdirectory ends in \
                          '/'."
                .to_string(),
            parameters: args::schema(&LIST_DIR_PARAMS),
        }
    }

    fn check(&self, arguments: &serde_json::Value, ctx: CallContext<'_>) -> Result<(), ToolError> {
        let args = args::check(arguments, &LIST_DIR_PARAMS)?;
        beneath_a_root(args.str("path").unwrap_or_default(), ctx)
    }

    fn call<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        ctx: CallContext<'a>,
    ) -> CallFuture<'a> {
        Box::pin(async move {
            let args = args::check(arguments, &LIST_DIR_PARAMS)?;
            let arg = paths::absolute(args.str("path").unwrap_or_default())?;
            let roots = ctx.grant.paths.clone();
            let cap = ctx.result_cap_bytes;
            blocking("list_dir", ctx.timeout_ms, move || {
                read::list_dir(&arg, &roots, cap)
            })
            .await
        })
    }
}

/// `write_file {path, content, overwrite?}`: writes a whole file atomically.
///
/// The content goes to a temporary file in the same directory, which is synced and then
/// renamed over the target, and the directory is synced: a reader sees the old file or the new
/// one, never part of either, and no temporary file is left behind. Without `overwrite: true` an
/// existing target (even a dangling symlink) is refused, and the refusal is atomic too (the new
/// file is renamed into place with `RENAME_NOREPLACE`, which fails if the name exists). The
/// directory must exist. An overwritten file keeps its permission bits but never setuid, setgid
/// or sticky. At most [`MAX_WRITE_BYTES`] of content. Answers `wrote N bytes to PATH`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

impl Tool for WriteFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "write_file".to_string(),
            description: "Write a text file, whole. Fails if it exists, unless overwrite is \
                          true."
                .to_string(),
            parameters: args::schema(&WRITE_FILE_PARAMS),
        }
    }

    fn check(&self, arguments: &serde_json::Value, ctx: CallContext<'_>) -> Result<(), ToolError> {
        let (arg, _, _) = write_arguments(arguments)?;
        paths::resolve_allowed(&arg, &ctx.grant.paths).map(|_| ())
    }

    fn call<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        ctx: CallContext<'a>,
    ) -> CallFuture<'a> {
        Box::pin(async move {
            let (arg, content, overwrite) = write_arguments(arguments)?;
            let roots = ctx.grant.paths.clone();
            let record = ctx
                .record
                .filter(|r| r.store.enabled())
                .map(|r| (r.clone(), ctx.grant.result_class));
            // Not while an exec's run under `rw_paths` is watched (`checkpoints::runs`).
            let one_at_a_time = match &record {
                Some((recorder, _)) => Some(recorder.store.tree_lock().lock_owned().await),
                None => None,
            };
            blocking("write_file", ctx.timeout_ms, move || {
                let _one_at_a_time = one_at_a_time;
                let target = write::Target {
                    arg: &arg,
                    roots: &roots,
                    record: record.as_ref().map(|(r, class)| (r, *class)),
                };
                write::write_file(&target, &content, overwrite)
            })
            .await
        })
    }
}

/// The check before a file tool runs (and before brokerd asks the owner about it): `arg` is
/// absolute and, as the tree is now, under one of the grant's roots. The tool checks again
/// when it runs, beneath the root's fd: this is only so that nobody is asked to approve a
/// call that would be refused anyway.
fn beneath_a_root(arg: &str, ctx: CallContext<'_>) -> Result<(), ToolError> {
    let path = paths::absolute(arg)?;
    paths::resolve_allowed(&path, &ctx.grant.paths).map(|_| ())
}

/// `write_file`'s arguments: the absolute path, the content (at most [`MAX_WRITE_BYTES`]) and
/// whether to overwrite.
fn write_arguments(arguments: &serde_json::Value) -> Result<(PathBuf, String, bool), ToolError> {
    let args = args::check(arguments, &WRITE_FILE_PARAMS)?;
    let arg = paths::absolute(args.str("path").unwrap_or_default())?;
    let content = args.str("content").unwrap_or_default();
    if content.len() > MAX_WRITE_BYTES {
        return Err(ToolError::InvalidArguments(format!(
            "key \"content\" is {} bytes; the most is {MAX_WRITE_BYTES}",
            content.len()
        )));
    }
    Ok((
        arg,
        content.to_string(),
        args.bool("overwrite").unwrap_or(false),
    ))
}

/// Runs `work` on the blocking pool, failing the call past `timeout_ms`.
async fn blocking<F>(tool: &str, timeout_ms: u64, work: F) -> Result<ToolOutput, ToolError>
where
    F: FnOnce() -> Result<ToolOutput, ToolError> + Send + 'static,
{
    let task = tokio::task::spawn_blocking(work);
    match tokio::time::timeout(Duration::from_millis(timeout_ms), task).await {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(ToolError::Failed(format!("{tool} stopped: {e}"))),
        Err(_) => Err(ToolError::Failed(format!(
            "{tool} ran past its time limit of {timeout_ms} ms"
        ))),
    }
}

/// A `Failed` for an I/O error `e` while doing `what` to `arg`.
fn io_failed(what: &str, arg: &Path, e: &io::Error) -> ToolError {
    ToolError::Failed(format!("cannot {what} {}: {e}", arg.display()))
}
