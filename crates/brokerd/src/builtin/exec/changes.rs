//! What a run under `rw_paths` changes, recorded for an undo: through an overlay
//! (`checkpoints::layers`: the run writes into a stage, applied after it) where the sandbox can
//! mount one ([`overlay_trial`](super::overlay_trial)) and every tree is the sandbox user's,
//! else by snapshots (`checkpoints::runs`: the trees are taken before the program starts). A
//! run whose trees can be recorded neither way does not start.

use super::overlay_trial::{self, OverlayTrial};
use crate::checkpoints::layers::{self, Layered};
use crate::checkpoints::runs::{self, Watch};
use crate::tool::{CallContext, ToolError};
use bxsandbox::{Pinned, Spec, Walls};
use std::os::fd::OwnedFd;
use std::path::PathBuf;

/// How a run's changes are being recorded.
#[derive(Debug)]
pub(super) enum Recording {
    /// Its writes go to stages, applied after it.
    Overlay(Layered),
    /// Its trees were taken before it.
    Snapshots(Watch),
}

/// Prepares the recording of `spec`'s `rw_paths` before the run, when the call is recorded
/// and has any: stages bound through `spec.overlay_stages`, or the trees taken. Its files may
/// then grow to `[checkpoints] max_bytes` at most, so that what they become can be kept. A
/// tree that cannot be kept refuses the call.
pub(super) async fn watch(
    ctx: &CallContext<'_>,
    spec: &mut Spec,
    walls: &Walls,
    trial: &OverlayTrial,
) -> Result<Option<Recording>, ToolError> {
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
    let store = &recorder.store;
    let max_bytes = store.max_bytes();
    let root = overlay_trial::stage_root(walls, store.dir());
    let overlay = trial
        .get_or_init(|| async {
            let answer = overlay_trial::trial(walls, &root).await;
            if let Err(why) = &answer {
                tracing::warn!(%why, "no overlay for exec runs here: they are recorded by snapshots");
                store.ways.overlay_unavailable(why.clone());
            }
            answer
        })
        .await
        .is_ok();
    let lock = store.tree_lock().lock_owned().await;
    let (recorder, class, ids) = (
        recorder.clone(),
        ctx.grant.result_class,
        walls.sandbox_ids(),
    );
    let owner = walls.run_as();
    let prepared = tokio::task::spawn_blocking(move || {
        if overlay && overlay_fits(&tops, ids, max_bytes) {
            let (layered, stages) = layers::stage(&recorder, class, tops, lock, &root, owner)?;
            Ok(Prepared::Overlay(layered, stages))
        } else {
            runs::watch(&recorder, class, tops, lock).map(Prepared::Snapshots)
        }
    })
    .await
    .map_err(|e| refused(e.to_string()))?
    .map_err(|e: crate::checkpoints::CheckpointError| refused(e.to_string()))?;
    spec.file_size_bytes = spec.file_size_bytes.min(max_bytes);
    Ok(Some(match prepared {
        Prepared::Overlay(layered, stages) => {
            for stage in stages {
                let pinned = Pinned::new(&stage).map_err(|e| refused(e.to_string()))?;
                spec.overlay_stages.push(pinned);
            }
            store.ways.took_overlay();
            Recording::Overlay(layered)
        }
        Prepared::Snapshots(watch) => {
            store.ways.took_snapshots();
            Recording::Snapshots(watch)
        }
    }))
}

/// What the blocking part prepared.
enum Prepared {
    Overlay(Layered, Vec<PathBuf>),
    Snapshots(Watch),
}

/// Whether every tree can go through an overlay: a path the overlay's options can hold, and
/// every entry the sandbox user's (`layers::eligible`); the snapshot way takes the rest.
fn overlay_fits(tops: &[(PathBuf, OwnedFd)], ids: (u32, u32), max_bytes: u64) -> bool {
    tops.iter().all(|(path, fd)| {
        let fits = if bxsandbox::overlay::safe_for_options(path) {
            layers::eligible(fd, ids, max_bytes)
        } else {
            Err("its path holds a character the overlay's options cannot".to_owned())
        };
        if let Err(why) = &fits {
            tracing::debug!(path = %path.display(), %why, "an rw path is recorded by snapshots");
        }
        fits.is_ok()
    })
}

/// Records what the run changed (applying it, through an overlay); a line for the result when
/// something of it failed.
pub(super) async fn finish(recording: Option<Recording>) -> Option<String> {
    match recording? {
        Recording::Snapshots(watch) => finish_snapshots(watch).await,
        Recording::Overlay(layered) => finish_overlay(layered).await,
    }
}

async fn finish_snapshots(watch: Watch) -> Option<String> {
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

async fn finish_overlay(layered: Layered) -> Option<String> {
    let finished = match tokio::task::spawn_blocking(move || layered.finish()).await {
        Ok(Ok(finished)) => finished,
        Ok(Err(e)) => return Some(not_applied(e.to_string())),
        Err(e) => return Some(not_applied(e.to_string())),
    };
    tracing::debug!(
        files = finished.records,
        "applied and recorded what an exec wrote"
    );
    let mut note = String::new();
    for why in &finished.conflicts {
        note.push_str(&format!(
            "note: a change of this run was not applied: {why}\n"
        ));
    }
    for path in &finished.skipped {
        note.push_str(&format!(
            "note: {} is not a file, directory or symlink: it was not kept\n",
            path.display()
        ));
    }
    (!note.is_empty()).then_some(note)
}

fn not_applied(why: String) -> String {
    tracing::error!(error = %why, "cannot apply what an exec wrote");
    format!("note: nothing this run wrote beneath its rw_paths was kept ({why})\n")
}
