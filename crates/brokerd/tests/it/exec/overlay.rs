//! `exec` under `rw_paths` through an overlay (`checkpoints::layers`), with the real sandbox:
//! a tree the sandbox's user owns gets the run's changes after it (an edit, a new file, a chmod, a directory removed, a symlink), each recorded,
//! and an undo puts it back byte for byte; a tree holding a file of another user is recorded
//! by snapshots; the status says which way each run took.

use super::{Tree, content, exec, succeeded, walls};
use brokerd::builtin::exec::Sandbox;
use brokerd::builtin::files::undo::undo;
use brokerd::checkpoints::{CheckpointSettings, Checkpoints};
use bxcore::SessionId;
use serde_json::json;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;

/// `path` and everything beneath it given to `ids`.
fn give(path: &Path, ids: (u32, u32)) {
    std::os::unix::fs::chown(path, Some(ids.0), Some(ids.1)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            give(&entry.unwrap().path(), ids);
        }
    }
}

/// The work tree of `tree` with its files, all the sandbox user's.
fn fill(tree: &Tree, ids: (u32, u32)) {
    std::fs::create_dir_all(tree.work.join("sub")).unwrap();
    std::fs::create_dir_all(tree.work.join("remade")).unwrap();
    std::fs::write(tree.work.join("remade/old.txt"), "old\n").unwrap();
    std::fs::write(tree.work.join("notes.txt"), "one\ntwo\n").unwrap();
    std::fs::write(tree.work.join("sub/gone.txt"), "kept before\n").unwrap();
    std::fs::write(tree.work.join("mode.sh"), "echo\n").unwrap();
    std::fs::set_permissions(tree.work.join("mode.sh"), PermissionsExt::from_mode(0o644)).unwrap();
    give(&tree.work, ids);
}

fn read(tree: &Tree, rel: &str) -> Option<String> {
    std::fs::read_to_string(tree.work.join(rel)).ok()
}

fn mode(tree: &Tree, rel: &str) -> u32 {
    std::fs::metadata(tree.work.join(rel)).unwrap().mode() & 0o777
}

const SCRIPT: &str = "sed -i s/two/TWO/ notes.txt && echo new > made.txt && chmod 755 mode.sh \
                      && rm -r sub && ln -s notes.txt link \
                      && rm -r remade && mkdir remade && echo fresh > remade/new.txt";

#[tokio::test]
async fn a_run_through_an_overlay_is_applied_after_it_recorded_and_undone_byte_for_byte() {
    let Some(walls) = walls().await else { return };
    let ids = walls.sandbox_ids();
    let tree = Tree::new();
    fill(&tree, ids);
    let store = Arc::new(
        Checkpoints::open(&tree.root.join("state"), CheckpointSettings::default()).unwrap(),
    );
    let b = tree
        .broker(
            Sandbox::Ready(walls),
            vec![tree.grant(json!({"shell": true}))],
        )
        .with_checkpoints(Arc::clone(&store));
    // The run sees its own writes (that the tree itself is left as it was until the run
    // ends is bxsandbox's test `overlay`).
    let r = exec(&b, &["sh", "-c", &format!("{SCRIPT} && cat notes.txt")]).await;
    assert!(succeeded(&r), "{r:?}");
    assert!(content(&r).contains("one\nTWO\n"), "{r:?}");

    assert_eq!(read(&tree, "notes.txt").as_deref(), Some("one\nTWO\n"));
    assert_eq!(read(&tree, "made.txt").as_deref(), Some("new\n"));
    assert_eq!(mode(&tree, "mode.sh"), 0o755);
    assert!(!tree.work.join("sub").exists());
    // A directory removed and made again (opaque in the upper directory): only the new file.
    assert_eq!(read(&tree, "remade/new.txt").as_deref(), Some("fresh\n"));
    assert_eq!(read(&tree, "remade/old.txt"), None);
    assert_eq!(
        std::fs::read_link(tree.work.join("link")).unwrap(),
        Path::new("notes.txt")
    );
    let made = std::fs::metadata(tree.work.join("made.txt")).unwrap();
    assert_eq!(
        (made.uid(), made.gid()),
        ids,
        "what is applied is the sandbox user's"
    );
    let status = store.status_line();
    assert!(
        status.contains("exec runs recorded: 1 through an overlay, 0 by snapshots"),
        "{status}"
    );
    let session = SessionId::new("main").unwrap();
    let mut recorded: Vec<String> = store
        .records(&session)
        .iter()
        .map(|r| r.rel.display().to_string())
        .collect();
    recorded.sort();
    assert_eq!(
        recorded,
        [
            "made.txt",
            "mode.sh",
            "notes.txt",
            "remade/new.txt",
            "remade/old.txt",
            "sub/gone.txt"
        ]
    );
    let ours = format!("{}-", std::process::id());
    for stages in [
        tree.root.join("state/checkpoints/stages"),
        "/run/bxsandbox-stages".into(),
    ] {
        let left = std::fs::read_dir(&stages).into_iter().flatten().flatten();
        let left: Vec<_> = left
            .filter(|e| e.file_name().to_string_lossy().starts_with(&ours))
            .collect();
        assert!(left.is_empty(), "a stage is left: {left:?}");
    }

    undo(&store, &session, 1, false).unwrap();
    assert_eq!(read(&tree, "notes.txt").as_deref(), Some("one\ntwo\n"));
    assert_eq!(
        read(&tree, "sub/gone.txt").as_deref(),
        Some("kept before\n")
    );
    assert_eq!(read(&tree, "made.txt"), None);
    assert_eq!(read(&tree, "remade/old.txt").as_deref(), Some("old\n"));
    assert_eq!(read(&tree, "remade/new.txt"), None);
    assert_eq!(mode(&tree, "mode.sh"), 0o644);
}

#[tokio::test]
async fn a_tree_holding_another_users_file_is_recorded_by_snapshots() {
    let Some(walls) = walls().await else { return };
    let ids = walls.sandbox_ids();
    let tree = Tree::new();
    fill(&tree, ids);
    // Another user's file, writable by all: the overlay could not copy it up.
    let other = tree.work.join("other.txt");
    std::fs::write(&other, "theirs\n").unwrap();
    std::os::unix::fs::chown(&other, Some(ids.0.wrapping_add(1)), Some(ids.1)).unwrap();
    std::fs::set_permissions(&other, PermissionsExt::from_mode(0o666)).unwrap();
    let store = Arc::new(
        Checkpoints::open(&tree.root.join("state"), CheckpointSettings::default()).unwrap(),
    );
    let b = tree
        .broker(
            Sandbox::Ready(walls),
            vec![tree.grant(json!({"shell": true}))],
        )
        .with_checkpoints(Arc::clone(&store));
    let r = exec(&b, &["sh", "-c", "echo mine > other.txt"]).await;
    assert!(succeeded(&r), "{r:?}");
    assert_eq!(read(&tree, "other.txt").as_deref(), Some("mine\n"));
    let status = store.status_line();
    assert!(
        status.contains("exec runs recorded: 0 through an overlay, 1 by snapshots"),
        "{status}"
    );
    let session = SessionId::new("main").unwrap();
    assert_eq!(store.records(&session).len(), 1);
}
