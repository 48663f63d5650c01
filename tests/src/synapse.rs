//! A real Matrix homeserver for chatd's tests: Synapse (installed from PyPI by
//! `scripts/fetch-parts.sh`, `$SYNAPSE_PYTHON` its environment's python) on a loopback port,
//! with SQLite, no federation, and registration only through its shared secret.

use crate::Running;
use crate::prometheus::{free_port, get};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The variable naming the python of Synapse's environment.
pub const SYNAPSE_ENV: &str = "SYNAPSE_PYTHON";
/// When `1`, a missing Synapse fails the test instead of skipping it (`scripts/test.sh`).
pub const REQUIRE_ENV: &str = "BOXMAKER_REQUIRE_SYNAPSE";
/// The homeserver's name: user ids are `@name:localhost`.
pub const SERVER_NAME: &str = "localhost";
/// The secret that registers users (the homeserver is the test's alone).
const REGISTRATION_SECRET: &str = "boxmaker-test-registration";
/// How long Synapse may take to answer after its start, in milliseconds.
const START_WAIT_MS: u64 = 60_000;
/// The pause between two looks at a starting Synapse, in milliseconds.
const START_POLL_MS: u64 = 100;

/// A running Synapse, stopped when dropped.
pub struct Synapse {
    /// Its base URL (`http://127.0.0.1:PORT`).
    pub url: String,
    python: PathBuf,
    _process: Running,
}

/// The python of Synapse's environment from `$SYNAPSE_PYTHON`; `None` (with a note on stderr)
/// when it is not set or not there, unless [`REQUIRE_ENV`] is `1`, which makes it a panic.
pub fn python_or_skip() -> Option<PathBuf> {
    let found = std::env::var_os(SYNAPSE_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    if found.is_none() {
        let why = "SYNAPSE_PYTHON must name the python of Synapse's environment: run `eval \
                   \"$(scripts/fetch-parts.sh --print-paths synapse)\"` and export \
                   SYNAPSE_PYTHON (scripts/test.sh does)";
        assert!(std::env::var(REQUIRE_ENV).as_deref() != Ok("1"), "{why}");
        eprintln!("skipping a Matrix test: {why}");
    }
    found
}

impl Synapse {
    /// Starts Synapse with its config, database and log under `dir`; `None` when the test is
    /// skipped ([`python_or_skip`]).
    pub fn start_or_skip(dir: &Path) -> Option<Synapse> {
        let python = python_or_skip()?;
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("synapse dir: {e}"));
        let port = free_port().unwrap_or_else(|e| panic!("a free port: {e}"));
        let config = dir.join("homeserver.yaml");
        std::fs::write(&config, homeserver_yaml(dir, port))
            .unwrap_or_else(|e| panic!("homeserver.yaml: {e}"));
        std::fs::write(dir.join("log.yaml"), log_yaml(dir))
            .unwrap_or_else(|e| panic!("log.yaml: {e}"));
        let generated = Command::new(&python)
            .args([
                "-m",
                "synapse.app.homeserver",
                "--generate-missing-configs",
                "-c",
            ])
            .arg(&config)
            .output()
            .unwrap_or_else(|e| panic!("run synapse: {e}"));
        assert!(
            generated.status.success(),
            "synapse --generate-missing-configs: {}",
            String::from_utf8_lossy(&generated.stderr)
        );
        let mut command = Command::new(&python);
        command
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(&config);
        let process = Running::start_logged(command, &dir.join("stderr.log"))
            .unwrap_or_else(|e| panic!("start synapse: {e}"));
        let deadline = Instant::now() + Duration::from_millis(START_WAIT_MS);
        while get(port, "/_matrix/client/versions").map(|(s, _)| s).ok() != Some(200) {
            assert!(
                Instant::now() < deadline,
                "Synapse did not answer within {START_WAIT_MS} ms; its log: {}",
                dir.join("homeserver.log").display()
            );
            std::thread::sleep(Duration::from_millis(START_POLL_MS));
        }
        Some(Synapse {
            url: format!("http://127.0.0.1:{port}"),
            python,
            _process: process,
        })
    }

    /// Registers `name` with `password` (not an admin); returns the user id.
    pub fn register(&self, name: &str, password: &str) -> String {
        let out = Command::new(&self.python)
            .args([
                "-m",
                "synapse._scripts.register_new_matrix_user",
                "--no-admin",
                "-u",
                name,
                "-p",
                password,
                "-k",
                REGISTRATION_SECRET,
                &self.url,
            ])
            .output()
            .unwrap_or_else(|e| panic!("run register_new_matrix_user: {e}"));
        assert!(
            out.status.success(),
            "registering {name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        format!("@{name}:{SERVER_NAME}")
    }
}

/// `template` (a file of `config/synapse/`) for a homeserver in `dir` on `port`.
fn filled(template: &str, dir: &Path, port: u16) -> String {
    template
        .replace("@DIR@", &dir.display().to_string())
        .replace("@PORT@", &port.to_string())
        .replace("@SECRET@", REGISTRATION_SECRET)
}

/// The homeserver's config: the template the demo fills too.
fn homeserver_yaml(dir: &Path, port: u16) -> String {
    filled(
        include_str!("../../config/synapse/homeserver.yaml"),
        dir,
        port,
    )
}

/// Its log's config.
fn log_yaml(dir: &Path) -> String {
    filled(include_str!("../../config/synapse/log.yaml"), dir, 0)
}
