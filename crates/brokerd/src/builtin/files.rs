//! The file tools: [`ReadFile`], [`ListDir`] and [`WriteFile`].
//!
//! Every path argument must be absolute and, resolved with its symlinks and `..`, lie under one
//! of the grant's `paths` roots (see [`paths`]); anything else is
//! [`ToolError::PathNotAllowed`]. Their results are the owner's data: the grant defaults label
//! them private (see `GrantDefaults`). The file work runs on tokio's blocking pool, bounded by
//! the call's `timeout_ms`.

pub(crate) mod args;
pub(crate) mod paths;
pub(crate) mod text;

use crate::tool::{CallContext, CallFuture, Tool, ToolError, ToolOutput};
use args::{Kind, Param};
use proto::ToolSchema;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
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

const READ_FILE_PARAMS: [Param; 1] = [path_param(
    "Absolute path of the file to read; it must lie under a directory this session was granted.",
)];

const LIST_DIR_PARAMS: [Param; 1] = [path_param(
    "Absolute path of the directory to list; it must lie under a directory this session was \
     granted.",
)];

const WRITE_FILE_PARAMS: [Param; 3] = [
    path_param(
        "Absolute path of the file to write; it must lie under a directory this session was \
         granted, and its directory must exist.",
    ),
    Param {
        name: "content",
        kind: Kind::String,
        required: true,
        description: "The whole new content of the file (UTF-8 text, at most 1 MiB).",
    },
    Param {
        name: "overwrite",
        kind: Kind::Bool,
        required: false,
        description: "Replace the file if it already exists. Default false: an existing file \
                      is left alone and the call fails.",
    },
];

/// `read_file {path}`: a text file's contents.
///
/// The file is read up to the call's `result_cap_bytes` (never whole when it is larger), as
/// UTF-8 with invalid bytes shown as U+FFFD, and cut on a character boundary (`truncated`).
/// A missing path, a directory or anything but a regular file is `Failed`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

impl Tool for ReadFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "read_file".to_string(),
            description: "Read a text file and return its contents. Bytes that are not valid \
                          UTF-8 show as U+FFFD. A long file is cut at the result size limit \
                          and marked truncated. Only files under the directories granted to \
                          this session can be read."
                .to_string(),
            parameters: args::schema(&READ_FILE_PARAMS),
        }
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
            blocking("read_file", ctx.timeout_ms, move || read(&arg, &roots, cap)).await
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
            description: "List a directory: one entry per line, sorted by name, \
                          subdirectories with a trailing '/'. A very long listing is cut and \
                          marked truncated. Only directories under those granted to this \
                          session can be listed."
                .to_string(),
            parameters: args::schema(&LIST_DIR_PARAMS),
        }
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
            blocking("list_dir", ctx.timeout_ms, move || list(&arg, &roots, cap)).await
        })
    }
}

/// `write_file {path, content, overwrite?}`: writes a whole file atomically.
///
/// The content goes to a temporary file in the same directory, which is synced and then
/// renamed over the target, and the directory is synced: a reader sees the old file or the new
/// one, never part of either, and no temporary file is left behind. Without `overwrite: true` an
/// existing target (even a dangling symlink) is refused, and the refusal is atomic too (the new
/// file is hard-linked into place, which fails if the name exists). The directory must exist.
/// At most [`MAX_WRITE_BYTES`] of content. Answers `wrote N bytes to PATH`.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

impl Tool for WriteFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "write_file".to_string(),
            description: "Write a text file atomically: readers see either the old file or \
                          the whole new one. Fails if the file exists, unless overwrite is \
                          true. The file's directory must already exist. Only paths under the \
                          directories granted to this session can be written."
                .to_string(),
            parameters: args::schema(&WRITE_FILE_PARAMS),
        }
    }

    fn call<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        ctx: CallContext<'a>,
    ) -> CallFuture<'a> {
        Box::pin(async move {
            let args = args::check(arguments, &WRITE_FILE_PARAMS)?;
            let arg = paths::absolute(args.str("path").unwrap_or_default())?;
            let content = args.str("content").unwrap_or_default();
            if content.len() > MAX_WRITE_BYTES {
                return Err(ToolError::InvalidArguments(format!(
                    "key \"content\" is {} bytes; the most is {MAX_WRITE_BYTES}",
                    content.len()
                )));
            }
            let content = content.to_string();
            let overwrite = args.bool("overwrite").unwrap_or(false);
            let roots = ctx.grant.paths.clone();
            blocking("write_file", ctx.timeout_ms, move || {
                write(&arg, &roots, &content, overwrite)
            })
            .await
        })
    }
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

/// `read_file`'s work.
fn read(arg: &Path, roots: &[PathBuf], cap: usize) -> Result<ToolOutput, ToolError> {
    let resolved = paths::resolve_allowed(arg, roots)?;
    if resolved.missing > 0 {
        return Err(ToolError::Failed(format!(
            "no such file: {}",
            arg.display()
        )));
    }
    let meta = fs::metadata(&resolved.path).map_err(|e| io_failed("read", arg, &e))?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is a directory, not a file (list_dir lists it)",
            arg.display()
        )));
    }
    if !meta.is_file() {
        return Err(ToolError::Failed(format!(
            "{} is not a regular file",
            arg.display()
        )));
    }
    let file = File::open(&resolved.path).map_err(|e| io_failed("read", arg, &e))?;
    // Read one byte past the cap, to know whether the file goes on.
    let limit = cap.saturating_add(1);
    let mut bytes = Vec::with_capacity(limit.min(usize::try_from(meta.len()).unwrap_or(limit)));
    file.take(u64::try_from(limit).unwrap_or(u64::MAX))
        .read_to_end(&mut bytes)
        .map_err(|e| io_failed("read", arg, &e))?;
    let (content, truncated) = text::capped_text(&bytes, cap);
    Ok(ToolOutput { content, truncated })
}

/// `list_dir`'s work.
fn list(arg: &Path, roots: &[PathBuf], cap: usize) -> Result<ToolOutput, ToolError> {
    let resolved = paths::resolve_allowed(arg, roots)?;
    if resolved.missing > 0 {
        return Err(ToolError::Failed(format!(
            "no such directory: {}",
            arg.display()
        )));
    }
    let failed = |e: io::Error| io_failed("list", arg, &e);
    let meta = fs::metadata(&resolved.path).map_err(failed)?;
    if !meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "{} is not a directory (read_file reads a file)",
            arg.display()
        )));
    }
    let mut entries: Vec<(String, bool)> = Vec::new();
    let mut truncated = false;
    for entry in fs::read_dir(&resolved.path).map_err(failed)? {
        if entries.len() == MAX_LIST_ENTRIES {
            truncated = true;
            break;
        }
        let entry = entry.map_err(failed)?;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        entries.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
    }
    entries.sort();
    let mut content = String::new();
    for (name, is_dir) in entries {
        let mut line = if name.chars().any(char::is_control) {
            format!("{name:?}")
        } else {
            name
        };
        if is_dir {
            line.push('/');
        }
        line.push('\n');
        if content.len() + line.len() > cap {
            truncated = true;
            break;
        }
        content.push_str(&line);
    }
    Ok(ToolOutput { content, truncated })
}

/// Numbers the temporary files of this process's writes.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A temporary file that is removed when dropped, unless it was renamed into place.
struct TempFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// `write_file`'s work.
fn write(
    arg: &Path,
    roots: &[PathBuf],
    content: &str,
    overwrite: bool,
) -> Result<ToolOutput, ToolError> {
    let resolved = paths::resolve_allowed(arg, roots)?;
    let failed = |e: io::Error| io_failed("write", arg, &e);
    let exists_error = || {
        ToolError::Failed(format!(
            "{} already exists; pass \"overwrite\": true to replace it",
            arg.display()
        ))
    };
    let target = resolved.path;
    let old = match resolved.missing {
        0 => {
            let meta = fs::metadata(&target).map_err(failed)?;
            if !meta.is_file() {
                return Err(ToolError::Failed(format!(
                    "{} exists and is not a regular file",
                    arg.display()
                )));
            }
            if !overwrite {
                return Err(exists_error());
            }
            Some(meta)
        }
        1 => None,
        _ => {
            return Err(ToolError::Failed(format!(
                "cannot write {}: its directory does not exist",
                arg.display()
            )));
        }
    };
    let Some(dir) = target.parent() else {
        return Err(ToolError::Failed(format!(
            "{} is not a file path",
            arg.display()
        )));
    };
    let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut temp = TempFile {
        path: dir.join(format!(".brokerd-write-{}-{n}.tmp", std::process::id())),
        keep: false,
    };
    let mut file = File::options()
        .write(true)
        .create_new(true)
        .open(&temp.path)
        .map_err(failed)?;
    file.write_all(content.as_bytes()).map_err(failed)?;
    if let Some(old) = old {
        file.set_permissions(old.permissions()).map_err(failed)?;
    }
    file.sync_all().map_err(failed)?;
    drop(file);
    if overwrite {
        fs::rename(&temp.path, &target).map_err(failed)?;
        temp.keep = true;
    } else {
        // A hard link refuses an existing name atomically; the temporary name then goes.
        match fs::hard_link(&temp.path, &target) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(exists_error()),
            Err(_) => {
                // A file system without hard links: check, then rename.
                if fs::symlink_metadata(&target).is_ok() {
                    return Err(exists_error());
                }
                fs::rename(&temp.path, &target).map_err(failed)?;
                temp.keep = true;
            }
        }
    }
    drop(temp);
    File::open(dir).and_then(|d| d.sync_all()).map_err(failed)?;
    Ok(ToolOutput {
        content: format!("wrote {} bytes to {}", content.len(), target.display()),
        truncated: false,
    })
}
