//! What a run under `rw_paths` changes, recorded for an undo (`checkpoints::runs`): the trees
//! are taken before the program starts, and a run whose trees cannot be kept does not start.

use crate::checkpoints::runs::{self, Watch};
use crate::tool::{CallContext, ToolError};
use bxsandbox::Spec;

/// Takes `spec`'s `rw_paths` trees before the run, when the call is recorded and has any; its
/// files may then grow to `[checkpoints] max_bytes` at most, so that what they become can be
/// kept. A tree that cannot be kept refuses the call.
pub(super) async fn watch(
    ctx: &CallContext<'_>,
    spec: &mut Spec,
) -> Result<Option<Watch>, ToolError> {
    let Some(recorder) = ctx.record.filter(|r| r.store.enabled()) else {
        return Ok(None);
    };
    if spec.rw_paths.is_empty() {
        return Ok(None);
    }
    let refused = |why: String| {
        ToolError::Failed(format!(
            "exec did not run: what its rw_paths hold could not be kept for an undo: {why}"
        ))
    };
    let mut tops = Vec::new();
    for pinned in &spec.rw_paths {
        pinned.check().map_err(|e| refused(e.to_string()))?;
        let fd = pinned.descriptor().map_err(|e| refused(e.to_string()))?;
        tops.push((pinned.path().to_path_buf(), fd));
    }
    let max_bytes = recorder.store.max_bytes();
    let lock = recorder.store.tree_lock().lock_owned().await;
    let recorder = recorder.clone();
    let class = ctx.grant.result_class;
    let watch = tokio::task::spawn_blocking(move || runs::watch(&recorder, class, tops, lock))
        .await
        .map_err(|e| refused(e.to_string()))?
        .map_err(|e| refused(e.to_string()))?;
    spec.file_size_bytes = spec.file_size_bytes.min(max_bytes);
    Ok(Some(watch))
}

/// Records what the run changed; a line for the result when that failed (the files stay as the
/// run left them, and brokerd's next start tries again).
pub(super) async fn finish(watch: Option<Watch>) -> Option<String> {
    let watch = watch?;
    let failed = match tokio::task::spawn_blocking(move || watch.finish()).await {
        Ok(Ok(files)) => {
            tracing::debug!(files, "recorded what an exec changed");
            return None;
        }
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    };
    tracing::error!(error = %failed, "cannot record what an exec changed");
    Some(format!(
        "note: what this run changed could not be recorded for an undo ({failed})\n"
    ))
}
