//! Whether a run's rw paths can go through an overlay here (`checkpoints::layers`): one trial
//! run per brokerd, before the first run that would take that way. The kernel may refuse the
//! shim's namespace or the mount (a kernel without unprivileged overlays, user namespaces
//! limited by policy, a state dir on a filesystem that cannot hold an upper directory); then
//! every run is recorded by snapshots, and the status says why.

use crate::checkpoints::layers::{ROOT_STAGE_DIR, UPPER, remove_stage, remove_stale_root_stages};
use bxsandbox::{Pinned, Spec, Status, Walls};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The limit on the trial run (milliseconds).
pub const TRIAL_TIMEOUT_MS: u64 = 10_000;
/// Numbers this process's trials.
static TRIALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The file the trial writes.
const TRIAL_FILE: &str = "trial";

/// The trial's answer, made once: `Ok` when the overlay way works here, else why not.
pub type OverlayTrial = Arc<tokio::sync::OnceCell<Result<(), String>>>;

/// Where the stages of runs inside `walls` live, `store_dir` being the checkpoints' own.
pub fn stage_root(walls: &Walls, store_dir: &Path) -> PathBuf {
    match walls.run_as() {
        Some(_) => PathBuf::from(ROOT_STAGE_DIR),
        None => store_dir.join(crate::checkpoints::layers::STAGES),
    }
}

/// Runs the trial in `root` (see the module): `sh -c ': > trial'` in a directory of the
/// sandbox's user through an overlay, which must leave the file in the upper directory and
/// none in the directory itself.
pub async fn trial(walls: &Walls, root: &Path) -> Result<(), String> {
    let ids = walls.sandbox_ids();
    if walls.run_as().is_some() {
        remove_stale_root_stages();
    }
    // Its own name: another broker of this process (tests make several) may try at once.
    let n = TRIALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = root.join(format!("trial-{}-{n}", std::process::id()));
    let made = (|| -> std::io::Result<()> {
        if walls.run_as().is_some() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o711)
                .create(root)?;
        }
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        for sub in ["lower", "stage", "stage/upper", "stage/work"] {
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(dir.join(sub))?;
        }
        // Deepest first, the trial's own directory last: until then none is the sandbox
        // user's to swap.
        for sub in ["lower", "stage/upper", "stage/work", "stage", ""] {
            std::os::unix::fs::lchown(dir.join(sub), Some(ids.0), Some(ids.1))?;
        }
        Ok(())
    })();
    let result = match made {
        Ok(()) => run(walls, &dir).await,
        Err(e) => Err(format!(
            "cannot make a trial stage in {}: {e}",
            root.display()
        )),
    };
    remove_stage(&dir);
    result
}

async fn run(walls: &Walls, dir: &Path) -> Result<(), String> {
    let pin = |path: PathBuf| Pinned::new(&path).map_err(|e| e.to_string());
    let mut spec = Spec::new(["sh", "-c", ": > trial"]);
    spec.rw_paths.push(pin(dir.join("lower"))?);
    spec.overlay_stages.push(pin(dir.join("stage"))?);
    spec.timeout_ms = TRIAL_TIMEOUT_MS;
    let outcome = bxsandbox::run(&spec, walls)
        .await
        .map_err(|e| format!("a trial run could not start: {e}"))?;
    if outcome.status != Status::Exited(0) {
        let stderr = String::from_utf8_lossy(&outcome.stderr.bytes);
        let said = stderr
            .lines()
            .next()
            .unwrap_or("nothing on stderr")
            .to_owned();
        return Err(format!("a trial run failed ({}): {said}", outcome.status));
    }
    let upper = dir.join("stage").join(UPPER).join(TRIAL_FILE);
    if dir.join("lower").join(TRIAL_FILE).exists() || !upper.is_file() {
        return Err("a trial run's write did not land in the overlay's upper directory".into());
    }
    Ok(())
}
