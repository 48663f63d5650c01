//! The shim works from wherever the checkout lies (issue 33.9): as root the sandbox runs as
//! nobody, who cannot enter a directory of mode 0700 (root's home, where a newcomer clones), so
//! a shim nobody cannot reach or execute is used through its copy in `SHIM_RUNTIME_DIR`; a
//! bound path beneath such a directory is refused, naming it and the fix.

use crate::common::walls;
use bxsandbox::shim_copy::SHIM_RUNTIME_DIR;
use bxsandbox::{Network, Pinned, ProbeOptions, RunError, Spec, Status, Walls};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A directory of mode 0700 (as root's home is), owned by the test's user.
fn closed_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// A copy of the built shim at `dir/target/debug/bxsandbox-shim`, of mode `mode`.
fn shim_in(dir: &Path, mode: u32) -> PathBuf {
    let debug = dir.join("target/debug");
    std::fs::create_dir_all(&debug).unwrap();
    let shim = debug.join("bxsandbox-shim");
    std::fs::copy(env!("CARGO_BIN_EXE_bxsandbox-shim"), &shim).unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(mode)).unwrap();
    shim
}

/// The walls with the shim at `shim`; `None` when the machine has no sandbox (see `common`).
async fn walls_with_shim(shim: PathBuf) -> Option<Result<Walls, bxsandbox::Unavailable>> {
    walls().await?;
    let options = ProbeOptions {
        search_path: std::env::var_os("PATH").unwrap_or_default(),
        shim: Some(shim),
    };
    Some(bxsandbox::probe(&options).await)
}

#[tokio::test]
async fn a_shim_under_a_directory_only_its_owner_may_enter_runs_programs() {
    let home = closed_dir();
    let shim = shim_in(home.path(), 0o755);
    let Some(walls) = walls_with_shim(shim.clone()).await else {
        return;
    };
    let walls = walls.unwrap_or_else(|why| panic!("the probe refused {shim:?}: {why}"));
    if nix::unistd::geteuid().is_root() {
        // The sandbox runs as nobody, who cannot reach the shim: the walls use its copy.
        assert!(
            walls.shim().starts_with(SHIM_RUNTIME_DIR),
            "{}",
            walls.shim().display()
        );
    }
    let outcome = bxsandbox::run(&Spec::new(["true"]), &walls).await.unwrap();
    assert_eq!(outcome.status, Status::Exited(0), "{outcome:?}");

    // With network the shim also runs outside bubblewrap, as the helper that makes the
    // run's network namespace.
    if matches!(walls.network(), Network::Slirp(_)) {
        let mut spec = Spec::new(["true"]);
        spec.network = true;
        let outcome = bxsandbox::run(&spec, &walls).await.unwrap();
        assert_eq!(outcome.status, Status::Exited(0), "{outcome:?}");
    }
}

#[tokio::test]
async fn a_shim_of_mode_0700_runs_programs_too() {
    let home = closed_dir();
    let shim = shim_in(home.path(), 0o700);
    let Some(walls) = walls_with_shim(shim.clone()).await else {
        return;
    };
    let walls = walls.unwrap_or_else(|why| panic!("the probe refused {shim:?}: {why}"));
    let outcome = bxsandbox::run(&Spec::new(["true"]), &walls).await.unwrap();
    assert_eq!(outcome.status, Status::Exited(0), "{outcome:?}");
}

#[tokio::test]
async fn as_root_a_bound_path_beneath_a_closed_directory_is_refused_naming_it_and_the_fix() {
    let Some(walls) = walls().await else { return };
    let Some((uid, _)) = walls.run_as() else {
        return; // Not root: the sandbox runs as the caller, who may enter its own directories.
    };
    let home = closed_dir();
    let data = home.path().join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut spec = Spec::new(["true"]);
    spec.ro_paths.push(Pinned::new(&data).unwrap());
    let err = bxsandbox::run(&spec, &walls).await.unwrap_err();
    assert!(matches!(err, RunError::Unreachable { .. }), "{err:?}");
    let home = home.path().canonicalize().unwrap();
    let data = data.canonicalize().unwrap();
    assert_eq!(
        err.to_string(),
        format!(
            "ro_paths entry {} cannot be bound: the sandbox runs as uid {uid} (nobody, since the \
             caller is root), and {} is mode 0700, which it may not enter; let others enter it \
             (chmod o+x {}) or bind a path outside it",
            data.display(),
            home.display(),
            home.display()
        )
    );
}
