//! The `brokerd` binary's command line: `--check-config`, override flags, and the daemon mode
//! that does not exist yet.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Output};

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/brokerd.toml");

/// Runs brokerd with `args` and no environment but `extra`.
fn brokerd(args: &[&str], extra: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_brokerd"));
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
    let out = brokerd(&["--check-config", SHIPPED], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("[[grants]]"), "{stdout}");
    assert!(stdout.contains("tool = \"echo\""), "{stdout}");
    assert!(stdout.contains("call_timeout_ms = 30000"), "{stdout}");
}

#[test]
fn cli_check_config_on_a_bad_file_exits_1_naming_file_and_key() {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(b"[[grants]]\ntool = \"read_file\"\npaths = [\"relative\"]\n")
        .unwrap();
    let path = f.path().display().to_string();
    let out = brokerd(&["--check-config", &path], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("{path}: key \"grants[0].paths[0]\"")),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn cli_check_config_shows_flag_overrides_and_env() {
    let out = brokerd(
        &[
            "--check-config",
            SHIPPED,
            "--socket",
            "/tmp/t/b.sock",
            "--state-dir",
            "/tmp/t/b",
        ],
        &[("BROKERD_LIMITS__CALL_TIMEOUT_MS", "1234")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("socket = \"/tmp/t/b.sock\""), "{stdout}");
    assert!(stdout.contains("state_dir = \"/tmp/t/b\""), "{stdout}");
    assert!(stdout.contains("call_timeout_ms = 1234"), "{stdout}");
}

#[test]
fn cli_check_config_bad_env_names_the_variable() {
    let out = brokerd(
        &["--check-config", SHIPPED],
        &[("BROKERD_LIMITS__CALL_TIMEOUT_MS", "soon")],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("environment variable BROKERD_LIMITS__CALL_TIMEOUT_MS"),
        "{stderr}"
    );
}

#[test]
fn cli_daemon_mode_without_check_config_is_not_implemented_and_exits_2() {
    let out = brokerd(&["--config", SHIPPED], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("not implemented yet"));
    assert!(out.stdout.is_empty());
}
