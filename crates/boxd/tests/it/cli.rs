//! The `boxd` binary's command line: `--check-config`, and `--config` errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Output};

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/boxd.toml");

/// Runs boxd with `args` and no environment but `extra`.
fn boxd(args: &[&str], extra: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_boxd"));
    cmd.env_clear().args(args);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn cli_check_config_on_the_shipped_file_prints_toml_and_exits_0() {
    let out = boxd(&["--check-config", SHIPPED], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("[[children]]"), "{stdout}");
    assert!(stdout.contains("name = \"loopd\""), "{stdout}");
    assert!(stdout.contains("max_restarts = 5"), "{stdout}");
}

#[test]
fn cli_check_config_on_a_bad_file_exits_1_naming_file_and_key() {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(
        b"[[children]]\nname = \"a\"\ncommand = \"a\"\nconfig_file = \"/c\"\nready = { socket = \"/s\" }\n",
    )
    .unwrap();
    let path = f.path().display().to_string();
    let out = boxd(&["--check-config", &path], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("{path}: key \"children[0].config_sha256\"")),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn cli_check_config_shows_env_overrides() {
    let out = boxd(
        &["--check-config", SHIPPED],
        &[("BOXD_RESTART__MAX_RESTARTS", "9")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("max_restarts = 9"));
}

#[test]
fn cli_without_a_config_exits_2() {
    let out = boxd(&[], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--config FILE"));
    assert!(out.stdout.is_empty());
}

#[test]
fn cli_daemon_mode_with_a_bad_config_exits_1_naming_the_key() {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(b"[restart]\nwindow_ms = 0\n").unwrap();
    let path = f.path().display().to_string();
    let out = boxd(&["--config", &path], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("restart.window_ms"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn cli_logs_to_stderr_when_journal_stream_names_another_stream() {
    // JOURNAL_STREAM makes boxd log to journald only when it names boxd's own stderr (here a
    // pipe, not the stream named), so the lines reach stderr whether journald runs here or not.
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(b"[restart]\nwindow_ms = 0\n").unwrap();
    let path = f.path().display().to_string();
    let out = boxd(&["--config", &path], &[("JOURNAL_STREAM", "8:12345")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("restart.window_ms"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn cli_exec_child_becomes_the_program_only_under_the_boxd_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ran");
    let script = format!("echo \"$0\" > '{}'", file.display());
    // Its parent is this test, not pid 1 (the boxd it names): it exits without running it.
    assert_ne!(std::process::id(), 1);
    let out = boxd(&["--exec-child", "1", "/bin/sh", "sh", "-c", &script], &[]);
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("boxd (pid 1) is gone"),
        "{}",
        text(&out.stderr)
    );
    assert!(!file.exists());
    // Named with its real parent's pid, it becomes the program, under the name it was given.
    let me = std::process::id().to_string();
    let out = boxd(
        &["--exec-child", &me, "/bin/sh", "my-sh", "-c", &script],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), "my-sh");
    // A program that cannot be executed: 127, saying why.
    let out = boxd(&["--exec-child", &me, "/nonexistent/x", "x"], &[]);
    assert_eq!(out.status.code(), Some(127));
    assert!(
        text(&out.stderr).contains("cannot execute /nonexistent/x"),
        "{}",
        text(&out.stderr)
    );
}
