//! The `brokerd` daemon's secrets, run for real: a secret file every user may read stops it
//! before it serves, with a clear error; a good file and a systemd credential are redacted
//! from results; SIGHUP reads them again (and does not stop brokerd), keeping the old value of
//! a file it cannot read; brokerd's own log never carries a value.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use brokerd::daemon::{SECRETS_RELOADED, SERVING};
use http::Method;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use proto::ToolResponse;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// How long a test waits for one log line of brokerd's, in milliseconds.
const WAIT_MS: u64 = 20_000;

const FILE_VALUE: &str = "file-secret-value-1234";
const NEW_FILE_VALUE: &str = "file-secret-value-rotated-5678";
const CREDENTIAL_VALUE: &str = "credential-value-abcdef";

/// Writes `value` to `path` with `mode`.
fn write_secret(path: &Path, value: &str, mode: u32) {
    std::fs::write(path, value).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A config with the secrets `api` (from `file`) and `cred` (a systemd credential), and echo
/// granted to `main`.
fn config_file(dir: &Path, file: &Path) -> PathBuf {
    let cfg = dir.join("brokerd.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[secrets]]\nname = \"api\"\nfile = {:?}\n\n[[secrets]]\nname = \"cred\"\n\n\
             [[grants]]\ntool = \"echo\"\nsessions = [\"main\"]\n",
            file.display().to_string()
        ),
    )
    .unwrap();
    cfg
}

/// A running brokerd and its log, line by line.
struct Brokerd {
    child: Child,
    lines: Receiver<String>,
    log: String,
    socket: PathBuf,
}

impl Brokerd {
    /// Starts brokerd on `cfg` in `dir` with `$CREDENTIALS_DIRECTORY` set to `credentials`.
    fn start(dir: &Path, cfg: &Path, credentials: &Path) -> Brokerd {
        let socket = dir.join("brokerd.sock");
        let mut child = Command::new(env!("CARGO_BIN_EXE_brokerd"))
            .env_clear()
            .env("CREDENTIALS_DIRECTORY", credentials)
            .args(["--config", &cfg.display().to_string()])
            .args(["--socket", &socket.display().to_string()])
            .args(["--state-dir", &dir.join("state").display().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (send, lines) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        Brokerd {
            child,
            lines,
            log: String::new(),
            socket,
        }
    }

    /// Waits for a log line holding `needle`; the line.
    fn wait_for(&mut self, needle: &str) -> String {
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_millis(WAIT_MS))
                .unwrap_or_else(|e| panic!("no {needle:?} ({e}); log:\n{}", self.log));
            self.log.push_str(&line);
            self.log.push('\n');
            if line.contains(needle) {
                return line;
            }
        }
    }

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        kill(pid, signal).unwrap();
    }

    /// What echo gives `main` for `text`.
    async fn echo(&self, text: &str) -> String {
        let arguments = serde_json::json!({ "text": text }).to_string();
        let call = common::request("main", 1, "echo", &arguments);
        let (_, bytes) = common::http(
            &self.socket,
            Method::POST,
            "/v1/call",
            Some(serde_json::to_vec(&call).unwrap()),
        )
        .await;
        match serde_json::from_slice(&bytes).unwrap() {
            ToolResponse::Result { content, .. } => content,
            other => panic!("{other:?}"),
        }
    }

    /// Stops brokerd with SIGTERM; its whole log.
    fn stop(mut self) -> String {
        self.signal(Signal::SIGTERM);
        let status = self.child.wait().unwrap();
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(WAIT_MS)) {
            self.log.push_str(&line);
            self.log.push('\n');
        }
        assert_eq!(status.code(), Some(0), "{}", self.log);
        std::mem::take(&mut self.log)
    }
}

impl Drop for Brokerd {
    /// A test that fails leaves no brokerd behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn a_world_readable_secret_file_stops_brokerd_before_it_serves_naming_secret_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("api.secret");
    write_secret(&file, FILE_VALUE, 0o644);
    let credentials = dir.path().join("credentials");
    std::fs::create_dir(&credentials).unwrap();
    let cfg = config_file(dir.path(), &file);
    let mut brokerd = Brokerd::start(dir.path(), &cfg, &credentials);
    // Its whole log, up to its exit; one that serves instead is stopped and fails the test.
    let mut log = String::new();
    loop {
        match brokerd.lines.recv_timeout(Duration::from_millis(WAIT_MS)) {
            Ok(line) if line.contains(SERVING) => {
                panic!("brokerd serves without its secrets:\n{log}{line}")
            }
            Ok(line) => {
                log.push_str(&line);
                log.push('\n');
            }
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("brokerd neither served nor exited:\n{log}"),
        }
    }
    let status = brokerd.child.wait().unwrap();
    let stderr = log;
    assert_eq!(status.code(), Some(1), "{stderr}");
    // Both are listed: the world-readable file, and the credential that is not there.
    assert!(stderr.contains("secret \"api\""), "{stderr}");
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert!(
        stderr.contains("readable or writable by every user"),
        "{stderr}"
    );
    assert!(stderr.contains("secret \"cred\""), "{stderr}");
    assert!(!stderr.contains(FILE_VALUE), "{stderr}");
    assert!(!stderr.contains(SERVING), "{stderr}");
    assert!(!brokerd.socket.exists());
}

#[tokio::test]
async fn brokerd_redacts_its_secrets_and_reads_them_again_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("api.secret");
    write_secret(&file, FILE_VALUE, 0o600);
    let credentials = dir.path().join("credentials");
    std::fs::create_dir(&credentials).unwrap();
    write_secret(&credentials.join("cred"), CREDENTIAL_VALUE, 0o400);
    let cfg = config_file(dir.path(), &file);
    let mut brokerd = Brokerd::start(dir.path(), &cfg, &credentials);
    brokerd.wait_for(SERVING);

    let both = format!("{FILE_VALUE} {CREDENTIAL_VALUE} {NEW_FILE_VALUE}");
    assert_eq!(
        brokerd.echo(&both).await,
        format!("{{secret:api}} {{secret:cred}} {NEW_FILE_VALUE}")
    );

    // The file changes; SIGHUP reads it again, and brokerd goes on serving.
    write_secret(&file, NEW_FILE_VALUE, 0o600);
    brokerd.signal(Signal::SIGHUP);
    let reloaded = brokerd.wait_for(SECRETS_RELOADED);
    assert!(reloaded.contains("secrets=2"), "{reloaded}");
    assert_eq!(
        brokerd.echo(&both).await,
        // The replaced value stays redacted (a server started before may still hold it).
        format!("{{secret:api}} {{secret:cred}} {{secret:api}}")
    );

    // A file it cannot use now: an error naming it, and the value it had stays.
    write_secret(&file, "an-unused-value-9999", 0o644);
    brokerd.signal(Signal::SIGHUP);
    let reloaded = brokerd.wait_for(SECRETS_RELOADED);
    assert!(reloaded.contains("failed=1"), "{reloaded}");
    assert!(
        brokerd.log.contains("readable or writable by every user"),
        "{}",
        brokerd.log
    );
    assert_eq!(
        brokerd.echo(&both).await,
        // The replaced value stays redacted (a server started before may still hold it).
        format!("{{secret:api}} {{secret:cred}} {{secret:api}}")
    );

    let log = brokerd.stop();
    for value in [FILE_VALUE, NEW_FILE_VALUE, CREDENTIAL_VALUE] {
        assert!(!log.contains(value), "{value} in the log:\n{log}");
    }
    let audit = std::fs::read_to_string(dir.path().join("state/audit.jsonl")).unwrap();
    for value in [FILE_VALUE, NEW_FILE_VALUE, CREDENTIAL_VALUE] {
        assert!(!audit.contains(value), "{value} in the audit log:\n{audit}");
    }
    assert!(audit.contains(r#""redacted":["api","cred"]"#), "{audit}");
}
