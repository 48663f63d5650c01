//! `exec` under `rw_paths` with checkpoints on, through the broker and the real sandbox: a run
//! whose tree is larger than `[checkpoints] max_bytes` is refused before it starts, saying
//! why; a run cannot make a file larger than `max_bytes` (its changes could not be kept); and
//! what a run changed is in the store for an undo.

use super::{Tree, content, exec, walls};
use brokerd::builtin::exec::Sandbox;
use brokerd::checkpoints::{CheckpointSettings, Checkpoints};
use serde_json::json;
use std::sync::Arc;

/// The `max_bytes` of these tests.
const MAX_BYTES: u64 = 4096;

#[tokio::test]
async fn a_tree_too_large_to_keep_is_refused_and_a_file_cannot_outgrow_max_bytes() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let settings = CheckpointSettings {
        max_bytes: MAX_BYTES,
        ..CheckpointSettings::default()
    };
    let store = Arc::new(Checkpoints::open(&tree.root.join("state"), settings).unwrap());
    let grant = tree.grant(json!({"shell": true}));
    let b = tree
        .broker(Sandbox::Ready(walls), vec![grant])
        .with_checkpoints(Arc::clone(&store));

    // A file of 8,000 bytes: refused (EFBIG), and what was made stays within max_bytes.
    let big = tree.work.join("big.bin");
    let line = format!("head -c 8000 /dev/zero > {}", big.display());
    let r = exec(&b, &["sh", "-c", &line]).await;
    assert!(
        !content(&r).starts_with("status: exited with status 0"),
        "{r:?}"
    );
    let made = std::fs::metadata(&big).map_or(0, |m| m.len());
    assert!(made <= MAX_BYTES, "a file of {made} bytes was made");
    let session = bxcore::SessionId::new("main").unwrap();
    assert!(
        store
            .records(&session)
            .iter()
            .any(|r| r.rel.ends_with("big.bin")),
        "what the run made is recorded"
    );

    // A tree over max_bytes (put there by someone else): the next run does not start.
    std::fs::write(tree.work.join("owner.bin"), vec![b'x'; 5000]).unwrap();
    let marker = tree.work.join("ran");
    let line = format!("touch {}", marker.display());
    let r = exec(&b, &["sh", "-c", &line]).await;
    let said = format!("{r:?}");
    assert!(
        said.contains("exec did not run") && said.contains("more bytes than 4096"),
        "{said}"
    );
    assert!(!marker.exists(), "the refused run ran");
}
