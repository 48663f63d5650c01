//! The `loopd` binary's command line: `--check-config`, override flags, and the daemon mode
//! that does not exist yet.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Output};

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/loopd.toml");

/// Runs loopd with `args` and no environment but `extra`.
fn loopd(args: &[&str], extra: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_loopd"));
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
    let out = loopd(&["--check-config", SHIPPED], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("[llama]"), "{stdout}");
    assert!(
        stdout.contains("url = \"http://127.0.0.1:8080\""),
        "{stdout}"
    );
    assert!(stdout.contains("max_steps = 32"), "{stdout}");
}

#[test]
fn cli_check_config_on_a_bad_file_exits_1_naming_file_and_key() {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(b"[llama]\nrequest_timeout_ms = \"soon\"\n")
        .unwrap();
    let path = f.path().display().to_string();
    let out = loopd(&["--check-config", &path], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&path), "{stderr}");
    assert!(stderr.contains("\"llama.request_timeout_ms\""), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn cli_check_config_shows_flag_overrides() {
    let out = loopd(
        &[
            "--check-config",
            SHIPPED,
            "--socket",
            "/tmp/t/loopd.sock",
            "--state-dir",
            "/tmp/t/state",
            "--llama",
            "http://127.0.0.1:9999",
            "--broker",
            "/tmp/t/brokerd.sock",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for want in [
        "socket = \"/tmp/t/loopd.sock\"",
        "state_dir = \"/tmp/t/state\"",
        "url = \"http://127.0.0.1:9999\"",
        "socket = \"/tmp/t/brokerd.sock\"",
    ] {
        assert!(stdout.contains(want), "{want} in {stdout}");
    }
}

#[test]
fn cli_check_config_applies_env_and_flags_win() {
    let out = loopd(
        &["--check-config", SHIPPED, "--llama", "http://flag:1"],
        &[
            ("LOOPD_LLAMA__URL", "http://env:1"),
            ("LOOPD_LOOP__MAX_STEPS", "7"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("url = \"http://flag:1\""), "{stdout}");
    assert!(stdout.contains("max_steps = 7"), "{stdout}");
}

#[test]
fn cli_check_config_bad_flag_value_names_the_flag() {
    let out = loopd(&["--check-config", SHIPPED, "--llama", "not a url"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("flag --llama: key \"llama.url\""),
        "{stderr}"
    );
}

#[test]
fn cli_check_config_missing_file_exits_1_naming_it() {
    let out = loopd(&["--check-config", "/nonexistent/loopd.toml"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/loopd.toml"));
}

#[test]
fn cli_daemon_mode_without_a_config_says_so_and_exits_2() {
    let out = loopd(&[], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--config FILE"));
}

#[test]
fn cli_daemon_refuses_to_start_when_llama_server_is_not_there() {
    let dir = tempfile::tempdir().unwrap();
    // A port that nobody listens on: bound, then released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let system = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/system.md");
    let config = dir.path().join("loopd.toml");
    std::fs::write(
        &config,
        format!(
            "socket = {:?}\nstate_dir = {:?}\n[llama]\nurl = \"http://127.0.0.1:{port}\"\n\
             health_wait_ms = 300\nretry_initial_backoff_ms = 10\nretry_max_backoff_ms = 20\n\
             [baseline]\nsystem = {system:?}\n",
            dir.path().join("loopd.sock"),
            dir.path().join("state"),
        ),
    )
    .unwrap();
    let out = loopd(&["--config", config.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.contains("not ready"), "{stderr}");
    assert!(!dir.path().join("loopd.sock").exists());
}
