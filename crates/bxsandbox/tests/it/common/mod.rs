//! The walls for the tests, and directories the sandbox's user can use.

use bxsandbox::{ExecRule, Outcome, Pinned, ProbeOptions, Spec, Walls};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// The walls from a real probe; `None` (test passes quietly) when bwrap is missing and not
/// required.
pub async fn walls() -> Option<Walls> {
    let options = ProbeOptions {
        search_path: std::env::var_os("PATH").unwrap_or_default(),
        shim: Some(PathBuf::from(env!("CARGO_BIN_EXE_bxsandbox-shim"))),
    };
    match bxsandbox::probe(&options).await {
        Ok(walls) => Some(walls),
        Err(why) if std::env::var("BOXMAKER_REQUIRE_BWRAP").as_deref() != Ok("1") => {
            eprintln!("skipped: the sandbox is {why}");
            None
        }
        Err(why) => panic!("BOXMAKER_REQUIRE_BWRAP=1 but the sandbox is {why}"),
    }
}

/// A directory the sandbox may use: when the tests run as root the sandbox runs as nobody.
pub fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

/// Runs `sh -c script` with `spec`'s other fields, and any program allowed (a shell run).
pub async fn sh(walls: &Walls, script: &str, mut spec: Spec) -> Outcome {
    spec.argv = vec!["sh".into(), "-c".into(), script.into()];
    spec.exec_rule = ExecRule::Any;
    let outcome = bxsandbox::run(&spec, walls).await.unwrap();
    eprintln!(
        "{script}: {} | stdout {} | stderr {}",
        outcome.status,
        String::from_utf8_lossy(&outcome.stdout.bytes),
        String::from_utf8_lossy(&outcome.stderr.bytes)
    );
    outcome
}

/// The text of stdout.
pub fn stdout(outcome: &Outcome) -> String {
    String::from_utf8_lossy(&outcome.stdout.bytes).into_owned()
}

/// `path` pinned, as a grant's path is when brokerd starts.
pub fn pin(path: &std::path::Path) -> Pinned {
    Pinned::new(path).unwrap()
}
