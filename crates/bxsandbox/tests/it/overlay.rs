//! A run whose rw path has an overlay stage: its writes land in the stage's upper directory and
//! the path is left as it was; the program holds no capability and cannot see the stages.

use crate::common::{pin, sh, stdout, walls};
use bxsandbox::{RunError, Spec, SpecError, Status, Walls};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// The uid and gid the sandbox runs as.
fn sandbox_ids(walls: &Walls) -> (u32, u32) {
    walls.run_as().unwrap_or_else(|| {
        (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        )
    })
}

/// `path` and everything beneath it given to the sandbox's user.
fn give(path: &Path, (uid, gid): (u32, u32)) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            give(&entry.unwrap().path(), (uid, gid));
        }
    }
}

/// A tree the sandbox's user owns (`a.txt`, `gone.txt`, `sub/s.txt`) and a stage for it.
fn tree_and_stage(walls: &Walls) -> (tempfile::TempDir, tempfile::TempDir) {
    let ids = sandbox_ids(walls);
    let tree = tempfile::tempdir().unwrap();
    std::fs::write(tree.path().join("a.txt"), "old\n").unwrap();
    std::fs::write(tree.path().join("gone.txt"), "bye\n").unwrap();
    std::fs::create_dir(tree.path().join("sub")).unwrap();
    std::fs::write(tree.path().join("sub/s.txt"), "s\n").unwrap();
    give(tree.path(), ids);
    let stage = tempfile::tempdir().unwrap();
    std::fs::set_permissions(stage.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    for dir in ["upper", "work"] {
        std::fs::create_dir(stage.path().join(dir)).unwrap();
        give(&stage.path().join(dir), ids);
    }
    (tree, stage)
}

#[tokio::test]
async fn the_runs_writes_land_in_the_upper_directory_and_the_tree_is_left_as_it_was() {
    let Some(walls) = walls().await else { return };
    let (tree, stage) = tree_and_stage(&walls);
    let mut spec = Spec::new(["sh"]);
    spec.rw_paths.push(pin(tree.path()));
    spec.overlay_stages.push(pin(stage.path()));
    let script = "echo new > a.txt && echo made > b.txt && rm gone.txt && mkdir d && \
                  echo x > d/y && mv sub moved && cat a.txt && ls";
    let outcome = sh(&walls, script, spec).await;
    assert_eq!(outcome.status, Status::Exited(0), "{outcome:?}");
    // The run saw its own writes.
    assert_eq!(stdout(&outcome), "new\na.txt\nb.txt\nd\nmoved\n");

    let read = |rel: &str| std::fs::read_to_string(tree.path().join(rel)).unwrap();
    assert_eq!(
        (read("a.txt"), read("gone.txt")),
        ("old\n".into(), "bye\n".into())
    );
    assert!(!tree.path().join("b.txt").exists() && !tree.path().join("d").exists());

    let upper = stage.path().join("upper");
    let read_upper = |rel: &str| std::fs::read_to_string(upper.join(rel)).unwrap();
    assert_eq!(read_upper("a.txt"), "new\n");
    assert_eq!(read_upper("b.txt"), "made\n");
    assert_eq!(read_upper("d/y"), "x\n");
    let whiteout = std::fs::symlink_metadata(upper.join("gone.txt")).unwrap();
    assert!(
        whiteout.file_type().is_char_device() && whiteout.rdev() == 0,
        "a removed file is a whiteout in the upper directory: {whiteout:?}"
    );
    // A directory moved is copied whole (no redirect to its lower path), the old one whited out.
    assert_eq!(read_upper("moved/s.txt"), "s\n");
    let old = std::fs::symlink_metadata(upper.join("sub")).unwrap();
    assert!(old.file_type().is_char_device(), "{old:?}");
    assert!(tree.path().join("sub/s.txt").exists());
}

#[tokio::test]
async fn the_program_holds_no_capability_and_cannot_see_the_stages() {
    let Some(walls) = walls().await else { return };
    let (tree, stage) = tree_and_stage(&walls);
    let mut spec = Spec::new(["sh"]);
    spec.rw_paths.push(pin(tree.path()));
    spec.overlay_stages.push(pin(stage.path()));
    let script = "id -u; grep -E '^Cap(Inh|Prm|Eff|Amb):' /proc/self/status; ls -A /.bxoverlay; \
                  echo written > /.bxoverlay/x || echo refused";
    let outcome = sh(&walls, script, spec).await;
    let (uid, _) = sandbox_ids(&walls);
    let zero = "0000000000000000";
    assert_eq!(
        stdout(&outcome),
        format!(
            "{uid}\nCapInh:\t{zero}\nCapPrm:\t{zero}\nCapEff:\t{zero}\nCapAmb:\t{zero}\nrefused\n"
        ),
        "{outcome:?}"
    );
    assert_eq!(
        std::fs::read_dir(stage.path().join("upper"))
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test]
async fn stages_that_do_not_match_the_rw_paths_one_for_one_are_refused() {
    let Some(walls) = walls().await else { return };
    let (tree, stage) = tree_and_stage(&walls);
    let mut spec = Spec::new(["true"]);
    spec.rw_paths.push(pin(tree.path()));
    spec.rw_paths.push(pin(stage.path()));
    spec.overlay_stages.push(pin(stage.path()));
    match bxsandbox::run(&spec, &walls).await {
        Err(RunError::Spec(err @ SpecError::Stages { .. })) => assert_eq!(
            err.to_string(),
            "1 overlay stages for 2 rw_paths entries: give one per entry, or none"
        ),
        other => panic!("not refused: {other:?}"),
    }
}
