#![allow(clippy::unwrap_used, clippy::expect_used)]
//! kill -9 of brokerd while an `exec` runs through an overlay (`checkpoints::layers`): the
//! program's writes are in its stage and the tree is as it was; the next start removes the
//! stage, and nothing of the run is applied nor recorded (a run that did not end changed
//! nothing).

use crate::checkpoint_kills::{WAIT_MS, exec_that_sleeps, kill9, start};
use http::Method;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The uid and gid the sandbox runs as: nobody's when the tests run as root, else ours.
fn sandbox_ids() -> (u32, u32) {
    let me = std::fs::metadata("/proc/self").unwrap();
    if me.uid() == 0 {
        (65534, 65534)
    } else {
        (me.uid(), me.gid())
    }
}

/// Where brokerd `pid`'s first stage is.
fn first_stage(state: &Path, pid: u32) -> PathBuf {
    let root = if sandbox_ids().0 == std::fs::metadata("/proc/self").unwrap().uid() {
        state.join("checkpoints/stages")
    } else {
        PathBuf::from(brokerd::checkpoints::layers::ROOT_STAGE_DIR)
    };
    root.join(format!("{pid}-0"))
}

#[tokio::test]
async fn a_kill_during_an_exec_through_an_overlay_leaves_the_tree_as_it_was_and_no_stage() {
    if std::env::var("BOXMAKER_REQUIRE_BWRAP").as_deref() != Ok("1") {
        eprintln!("skipped: the sandbox is not required here (scripts/test.sh requires it)");
        return;
    }
    let ids = sandbox_ids();
    let dir = tempfile::tempdir().unwrap();
    let root: PathBuf = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let root = root.canonicalize().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let notes = root.join("notes.txt");
    std::fs::write(&notes, "before\n").unwrap();
    for path in [&root, &notes] {
        std::os::unix::fs::chown(path, Some(ids.0), Some(ids.1)).unwrap();
    }
    let (mut child, socket, sent) = exec_that_sleeps(dir.path(), &root).await;
    // Killed while the program runs, once both writes are in its stage.
    let stage = first_stage(&dir.path().join("state"), child.id());
    let upper = stage.join("0/upper");
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while !(upper.join("made.txt").exists() && upper.join("notes.txt").exists()) {
        if sent.is_finished() {
            let (status, body) = sent.await.unwrap();
            panic!(
                "the run ended before the kill: {status} {}",
                String::from_utf8_lossy(&body)
            );
        }
        assert!(
            Instant::now() < deadline,
            "the run never wrote to its stage"
        );
        tokio::task::yield_now().await;
    }
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "before\n");
    kill9(&mut child, &sent);

    let mut again = start(dir.path());
    assert!(!stage.exists(), "the stage of the killed run is left");
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "before\n");
    assert!(!root.join("made.txt").exists());
    let (status, diff) =
        crate::common::http_json(&socket, Method::GET, "/v1/diff?session=s", None).await;
    assert_eq!(status, http::StatusCode::OK, "{diff}");
    assert_eq!(diff["files"].as_array().unwrap().len(), 0, "{diff}");
    let _ = again.kill();
    again.wait().unwrap();
}
