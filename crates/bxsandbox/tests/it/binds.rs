//! Pinned paths: a run binds what a path named when it was pinned, never what an earlier run
//! made it name (issue 32.1).

use crate::common::{open_dir, pin, sh, walls};
use bxsandbox::{RunError, Spec, SpecError};
use std::os::unix::fs::PermissionsExt;

const SECRET: &str = "outside the grant";

/// `rw/a/b` (writable by the sandbox's user), and a directory outside holding a secret.
fn tree() -> (tempfile::TempDir, tempfile::TempDir) {
    let rw = open_dir();
    let b = rw.path().join("a/b");
    std::fs::create_dir_all(&b).unwrap();
    for dir in [rw.path().join("a"), b] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let outside = open_dir();
    std::fs::write(outside.path().join("secret.txt"), SECRET).unwrap();
    (rw, outside)
}

/// Run 1, under a spec that may write `rw`: rename `a` (the parent of the bound `a/b`) and
/// plant `a/b` as a symlink to `target`.
async fn swap(walls: &bxsandbox::Walls, rw: &std::path::Path, target: &std::path::Path) {
    let mut spec = Spec::new(["sh"]);
    spec.rw_paths.push(pin(rw));
    let script = format!(
        "mv a a2 && mkdir a && ln -s {} a/b && echo swapped",
        target.display()
    );
    let outcome = sh(walls, &script, spec).await;
    assert_eq!(crate::common::stdout(&outcome), "swapped\n", "{outcome:?}");
    assert!(rw.join("a/b").is_symlink());
}

fn refused_naming(result: Result<bxsandbox::Outcome, RunError>, path: &std::path::Path) {
    match result {
        Err(RunError::Spec(err @ SpecError::Path { .. })) => {
            let text = err.to_string();
            assert!(text.contains(path.to_str().unwrap()), "{text}");
            assert!(text.contains("no longer names"), "{text}");
        }
        other => panic!("run 2 was not refused: {other:?}"),
    }
}

#[tokio::test]
async fn a_ro_path_whose_parent_an_earlier_run_renamed_is_refused_not_rebound() {
    let Some(walls) = walls().await else { return };
    let (rw, outside) = tree();
    let entry = rw.path().join("a/b");
    let pinned = pin(&entry);
    swap(&walls, rw.path(), outside.path()).await;

    let mut spec = Spec::new(["cat"]);
    spec.argv
        .push(entry.join("secret.txt").to_str().unwrap().to_owned());
    spec.ro_paths.push(pinned);
    refused_naming(bxsandbox::run(&spec, &walls).await, &entry);
}

#[tokio::test]
async fn a_second_rw_path_swapped_for_a_symlink_to_the_root_is_refused_not_rebound() {
    let Some(walls) = walls().await else { return };
    let (rw, _outside) = tree();
    let entry = rw.path().join("a/b");
    let pinned = pin(&entry);
    swap(&walls, rw.path(), std::path::Path::new("/")).await;

    let mut spec = Spec::new(["touch"]);
    spec.argv
        .push(entry.join("planted").to_str().unwrap().to_owned());
    spec.rw_paths.push(pinned);
    refused_naming(bxsandbox::run(&spec, &walls).await, &entry);
    assert!(!std::path::Path::new("/planted").exists());
}

#[tokio::test]
async fn the_pinned_directory_is_the_one_bound() {
    let Some(walls) = walls().await else { return };
    let (rw, _outside) = tree();
    let entry = rw.path().join("a/b");
    std::fs::write(entry.join("mine.txt"), "pinned").unwrap();
    let mut spec = Spec::new(["cat"]);
    spec.argv
        .push(entry.join("mine.txt").to_str().unwrap().to_owned());
    spec.ro_paths.push(pin(&entry));
    let outcome = bxsandbox::run(&spec, &walls).await.unwrap();
    assert_eq!(crate::common::stdout(&outcome), "pinned", "{outcome:?}");
}
