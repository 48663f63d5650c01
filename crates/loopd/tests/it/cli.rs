//! The `loopd` binary's command line: `--check-config`, override flags, and what the daemon
//! refuses at start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::fake_llama;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The longest a test waits for loopd to give up starting, in milliseconds.
const WAIT_MS: u64 = 20_000;

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
    // `url` is unset in the shipped file (its default, http://127.0.0.1:8080, applies).
    assert!(stdout.contains("health_interval_ms = 5000"), "{stdout}");
    assert!(stdout.contains("max_steps = 32"), "{stdout}");
    // The file tools the shipped grants allow are core; the result cap follows the slot.
    assert!(
        stdout.contains("core_tools = [\"read_file\", \"list_dir\"]"),
        "{stdout}"
    );
    assert!(!stdout.contains("tool_result_cap_bytes"), "{stdout}");
    assert!(out.stderr.is_empty(), "no warning: {}", text(&out.stderr));
}

/// A config file with `body`, kept while the returned handle lives.
fn config_file(body: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(body.as_bytes()).unwrap();
    f
}

#[test]
fn cli_check_config_warns_that_a_result_cap_is_checked_against_the_slot_at_start() {
    let f = config_file("[loop]\ntool_result_cap_bytes = 16384\n");
    let out = loopd(&["--check-config", f.path().to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("warning: ") && stderr.contains("key \"loop.tool_result_cap_bytes\""),
        "{stderr}"
    );
    assert!(stderr.contains("4096-token slot"), "{stderr}");
    let stdout = text(&out.stdout);
    assert!(stdout.contains("# warning: "), "{stdout}");
    assert!(stdout.contains("tool_result_cap_bytes = 16384"), "{stdout}");
}

#[test]
fn cli_check_config_refuses_a_result_cap_too_large_for_the_expected_slot() {
    let f = config_file("[expect]\nn_ctx = 4096\n[loop]\ntool_result_cap_bytes = 16384\n");
    let out = loopd(&["--check-config", f.path().to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("key \"loop.tool_result_cap_bytes\""),
        "{stderr}"
    );
    assert!(stderr.contains("4096-token slot"), "{stderr}");
    let fits = config_file("[expect]\nn_ctx = 4096\n[loop]\ntool_result_cap_bytes = 4096\n");
    let out = loopd(&["--check-config", fits.path().to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
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
fn cli_daemon_names_a_missing_system_prompt_and_its_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-system.md");
    let config = dir.path().join("loopd.toml");
    std::fs::write(
        &config,
        format!(
            "socket = {:?}\nstate_dir = {:?}\n[baseline]\nsystem = {missing:?}\n",
            dir.path().join("loopd.sock"),
            dir.path().join("state"),
        ),
    )
    .unwrap();
    let out = loopd(&["--config", config.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no-such-system.md"), "{stderr}");
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "the OS error once: {stderr}"
    );
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

#[test]
fn loopd_refuses_to_start_with_a_cap_larger_than_the_slot_allows() {
    let fake = fake_llama::Fake::start(fakellama::Options {
        n_ctx: 4096,
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let system = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/system.md");
    let config = dir.path().join("loopd.toml");
    std::fs::write(
        &config,
        format!(
            "socket = {:?}\nstate_dir = {:?}\n[llama]\nurl = {:?}\n[baseline]\nsystem = {system:?}\n\
             [loop]\ntool_result_cap_bytes = 16384\n",
            dir.path().join("loopd.sock"),
            dir.path().join("state"),
            fake.server.url(),
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopd"))
        .env_clear()
        .args(["--config", config.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("loopd still runs after {WAIT_MS} ms with a cap the slot cannot hold");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("loop.tool_result_cap_bytes"), "{stderr}");
    assert!(stderr.contains("4096-token slot"), "{stderr}");
    assert!(!dir.path().join("loopd.sock").exists());
}

#[test]
fn cli_check_config_takes_endpoints_and_refuses_the_llama_flag_beside_them() {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(
        b"[[llama.endpoints]]\nname = \"local\"\nurl = \"unix:/run/boxmaker/llama.sock\"\n\
          roles = [\"background\", \"subagent\"]\n\
          [[llama.endpoints]]\nname = \"cupboard\"\nurl = \"https://gpu.lan:8443\"\n\
          roles = [\"main\"]\nslots = { main = [0, 1] }\n",
    )
    .unwrap();
    let path = f.path().to_str().unwrap();
    let out = loopd(&["--check-config", path], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("name = \"cupboard\""));
    let out = loopd(&["--check-config", path, "--llama", "http://h:1"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("llama.url"), "{stderr}");
    assert!(stderr.contains("[[llama.endpoints]]"), "{stderr}");
}

/// Issue 35.8: `loopd --help` says what loopd does, in the present tense, not what it will do.
#[test]
fn cli_help_is_in_the_present_tense() {
    let out = loopd(&["--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    assert!(help.contains("loopd holds persistent sessions"), "{help}");
    for future in [" will ", "will be", "'ll "] {
        assert!(!help.contains(future), "{future:?} in: {help}");
    }
}

#[test]
fn cli_check_config_reads_time_zones_from_tzdir_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("zoneinfo");
    std::fs::create_dir_all(db.join("Box")).unwrap();
    let tokyo = ["/usr/share/zoneinfo", "/etc/zoneinfo", "/share/zoneinfo"]
        .iter()
        .map(|d| std::path::Path::new(d).join("Asia/Tokyo"))
        .find(|p| p.exists())
        .expect("the test command installs tzdata");
    std::fs::copy(tokyo, db.join("Box/Home")).unwrap();
    let config = dir.path().join("loopd.toml");
    std::fs::write(
        &config,
        "[[schedules]]\nname = \"morning\"\ncron = \"0 7 * * *\"\ntimezone = \"Box/Home\"\n\
         task = \"Summarise.\"\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let found = loopd(
        &["--check-config", config],
        &[("TZDIR", db.to_str().unwrap())],
    );
    assert_eq!(found.status.code(), Some(0), "{}", text(&found.stderr));
    let missing = loopd(&["--check-config", config], &[]);
    assert_eq!(missing.status.code(), Some(1), "{}", text(&missing.stdout));
    let said = format!("{}{}", text(&missing.stdout), text(&missing.stderr));
    assert!(
        said.contains("\"Box/Home\" is not an IANA time zone name"),
        "{said}"
    );
}
