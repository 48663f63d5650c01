#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The scripts ask cargo where the binaries are, so a `CARGO_TARGET_DIR` (common among Rust
//! users) does not break the README's commands.

use e2e::{bin_dir, workspace_root};
use std::process::Command;

/// `cargo_bin_dir` from `scripts/lib/bin-dir.sh`, run in the workspace with `target_dir` as
/// `CARGO_TARGET_DIR` (inherited when `None`).
fn cargo_bin_dir(target_dir: Option<&std::path::Path>) -> String {
    let mut command = Command::new("bash");
    command
        .current_dir(workspace_root())
        .args(["-c", ". scripts/lib/bin-dir.sh && cargo_bin_dir"]);
    if let Some(dir) = target_dir {
        command.env("CARGO_TARGET_DIR", dir);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn scripts_find_the_binaries_where_cargo_puts_them() {
    let elsewhere = tempfile::tempdir().unwrap();
    assert_eq!(
        cargo_bin_dir(Some(elsewhere.path())),
        elsewhere.path().join("debug").display().to_string()
    );
    // And, as this test runs, where this test's own binaries are.
    assert_eq!(
        std::fs::canonicalize(cargo_bin_dir(None)).unwrap(),
        std::fs::canonicalize(bin_dir()).unwrap()
    );
}

#[test]
fn no_script_assumes_target_debug() {
    for entry in std::fs::read_dir(workspace_root().join("scripts")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sh") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains("target/debug"),
                "{} names target/debug: ask cargo (scripts/lib/bin-dir.sh)",
                path.display()
            );
        }
    }
}
