//! A grant's bound path is the one pinned when brokerd started (issue 32.1). An earlier call
//! under a grant that may write a parent of the path renames that parent and plants a symlink
//! in the path's place; a later call under the grant that binds the path must be refused, not
//! bind the symlink's target (another directory, or the host's `/`).

use super::*;

const OUTSIDE_SECRET: &str = "outside every grant";

/// `exec` as `session`.
async fn exec_as(b: &Broker, session: &str, argv: &[&str]) -> ToolResponse {
    let args = json!({ "argv": argv }).to_string();
    let response = b.call(&request(session, 1, "exec", &args)).await;
    eprintln!("{session} {argv:?}: {response:?}");
    response
}

/// A grant of `keys` for `session` alone (no rw_paths unless `keys` sets them).
fn grant_for(session: &str, keys: Value) -> Grant {
    let mut grant = json!({"tool": "exec", "sessions": [session]});
    for (k, v) in keys.as_object().unwrap() {
        grant[k] = v.clone();
    }
    serde_json::from_value(grant).unwrap()
}

/// The refusal of a call whose bound path moved: a failure naming the path, nothing read.
fn refused_naming(r: &ToolResponse, path: &Path) {
    match r {
        ToolResponse::Failed { message, .. } => {
            assert!(message.contains(path.to_str().unwrap()), "{message}");
            assert!(message.contains("no longer names"), "{message}");
        }
        other => panic!("the call was not refused: {other:?}"),
    }
}

#[tokio::test]
async fn a_bound_path_an_earlier_call_redirected_is_refused_never_bound() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let entry = tree.work.join("a/b");
    std::fs::create_dir_all(&entry).unwrap();
    open(&tree.work.join("a"), 0o777);
    open(&entry, 0o777);
    std::fs::write(entry.join("mine.txt"), "pinned").unwrap();
    open(&entry.join("mine.txt"), 0o644);
    let secret = tree.outside.join("secret.txt");
    std::fs::write(&secret, OUTSIDE_SECRET).unwrap();
    open(&secret, 0o644);

    // `main` may write work/ (a shell grant); `reader` binds work/a/b read-only and `writer`
    // binds it read-write. (--check-config refuses this nesting; the runtime wall must hold
    // without it, since a config is not always checked and paths move.)
    let main = tree.grant(json!({"shell": true, "sessions": ["main"]}));
    let reader = grant_for("reader", json!({"programs": ["cat"], "ro_paths": [entry]}));
    let writer = grant_for(
        "writer",
        json!({"programs": ["touch"], "rw_paths": [entry]}),
    );
    let b = tree.broker(Sandbox::Ready(walls), vec![main, reader, writer]);

    // The control: before the swap the reader reads the pinned directory.
    let mine = entry.join("mine.txt");
    let r = exec_as(&b, "reader", &["cat", mine.to_str().unwrap()]).await;
    assert!(content(&r).contains("pinned"), "{r:?}");

    // Call 1: rename the entry's parent and plant a symlink to the outside directory.
    let line = format!(
        "cd {} && mv a a2 && mkdir a && ln -s {} a/b && echo swapped",
        tree.work.display(),
        tree.outside.display()
    );
    let r = exec(&b, &["sh", "-c", &line]).await;
    assert!(content(&r).contains("swapped"), "{r:?}");
    assert!(entry.is_symlink());

    // Call 2: the reader's ro path now names the outside directory; it must not be bound,
    // neither where the grant puts it nor where it resolves to now.
    let through = entry.join("secret.txt");
    let argv = ["cat", through.to_str().unwrap(), secret.to_str().unwrap()];
    let r = exec_as(&b, "reader", &argv).await;
    assert!(!format!("{r:?}").contains(OUTSIDE_SECRET), "{r:?}");
    refused_naming(&r, &entry);

    // The same with the host's root, under the read-write grant.
    std::fs::remove_file(&entry).unwrap();
    std::os::unix::fs::symlink("/", &entry).unwrap();
    let planted = entry.join("planted-by-exec");
    let r = exec_as(&b, "writer", &["touch", planted.to_str().unwrap()]).await;
    refused_naming(&r, &entry);
    assert!(!Path::new("/planted-by-exec").exists());
}
