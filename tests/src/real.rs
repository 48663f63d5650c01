//! A real llama-server for the tests that need one: its parts come from
//! `scripts/fetch-parts.sh` (built and cached once), named by environment variables.

use crate::{READY_TIMEOUT_MS, Running};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

/// Set to `1` (as `scripts/test.sh` does) to make a missing real model a failure, not a skip.
pub const REQUIRE_ENV: &str = "BOXMAKER_REQUIRE_REAL_MODEL";
/// How long a model may take to load, in milliseconds.
pub const LOAD_TIMEOUT_MS: u64 = 180_000;

/// llama-server for the tests and the bench of the KV files (issue 22): loopd's three default
/// slots (main 0, background 1, subagent 2), deterministic sampling, warnings only, and no
/// prompt cache in memory (`--cache-ram 0`), which would otherwise restore some prefixes by
/// itself; `--slot-save-path DIR` (loopd's `[kv]` directory) comes after these.
pub const KV_SERVER_ARGS: [&str; 12] = [
    "-c",
    "4096",
    "--parallel",
    "3",
    "--temp",
    "0",
    "--seed",
    "7",
    "-lv",
    "2",
    "--cache-ram",
    "0",
];

/// The real parts: the llama-server binary and the two models.
#[derive(Debug, Clone)]
pub struct RealParts {
    /// `LLAMA_SERVER`.
    pub llama_server: PathBuf,
    /// `SMOLLM2_GGUF`: SmolLM2-135M-Instruct (no tool support in its template).
    pub smollm2: PathBuf,
    /// `QWEN_GGUF`: Qwen2.5-Coder-0.5B-Instruct.
    pub qwen: PathBuf,
}

impl RealParts {
    /// The parts named by `LLAMA_SERVER`, `SMOLLM2_GGUF`, `QWEN_GGUF`; `None` (with a note on
    /// stderr) when they are not set, unless [`REQUIRE_ENV`] is `1`, which makes it a panic.
    pub fn from_env() -> Option<RealParts> {
        let get = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_file())
        };
        match (get("LLAMA_SERVER"), get("SMOLLM2_GGUF"), get("QWEN_GGUF")) {
            (Some(llama_server), Some(smollm2), Some(qwen)) => Some(RealParts {
                llama_server,
                smollm2,
                qwen,
            }),
            _ => {
                let why = "LLAMA_SERVER, SMOLLM2_GGUF and QWEN_GGUF must name files: \
                           run `eval \"$(scripts/fetch-parts.sh --print-paths)\"` first \
                           (scripts/test.sh does)";
                assert!(std::env::var(REQUIRE_ENV).as_deref() != Ok("1"), "{why}");
                eprintln!("skipping a real-model test: {why}");
                None
            }
        }
    }
}

/// A running llama-server on a free loopback port.
pub struct LlamaServer {
    /// The process.
    pub running: Running,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl LlamaServer {
    /// Starts `server -m model ARGS --host 127.0.0.1 --port P --no-webui` and waits (bounded)
    /// until `/health` answers 200.
    pub fn start(server: &PathBuf, model: &PathBuf, args: &[&str]) -> std::io::Result<Self> {
        LlamaServer::start_with(server, model, args, None)
    }

    /// [`LlamaServer::start`] with the server's log (its stderr) written to the file `log`
    /// instead of the test's output, for a test that reads it.
    pub fn start_logged(
        server: &PathBuf,
        model: &PathBuf,
        args: &[&str],
        log: &Path,
    ) -> std::io::Result<Self> {
        LlamaServer::start_with(server, model, args, Some(log))
    }

    fn start_with(
        server: &PathBuf,
        model: &PathBuf,
        args: &[&str],
        log: Option<&Path>,
    ) -> std::io::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut command = Command::new(server);
        command.arg("-m").arg(model).args(args).args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--no-webui",
        ]);
        let mut running = match log {
            Some(log) => Running::start_logged(command, log)?,
            None => Running::start(command)?,
        };
        let deadline =
            Instant::now() + Duration::from_millis(LOAD_TIMEOUT_MS.max(READY_TIMEOUT_MS));
        while health(port) != Some(200) {
            if let Some(status) = running.exited() {
                return Err(std::io::Error::other(format!(
                    "llama-server exited: {status}"
                )));
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other("llama-server did not become ready"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(LlamaServer {
            running,
            url: format!("http://127.0.0.1:{port}"),
        })
    }
}

/// The status code of `GET /health`, if anything answered.
fn health(port: u16) -> Option<u16> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// The machine, as the tests of one process share it: a real-model test holds it alone, the
/// heavy tests share it. The end-to-end tests are one binary, so they run at once in one
/// process; this keeps the real-model tests apart as they were in binaries of their own.
static MACHINE: RwLock<()> = RwLock::new(());

/// The real-model tests run one at a time and beside no heavy test: each starts a llama-server
/// that uses every core, and two at once on a small machine make both slow enough to look hung
/// (`real_day` has a 600 s limit per task). Take this first; a test that failed while holding
/// it does not stop the others.
pub fn one_at_a_time() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(PoisonError::into_inner)
}

/// A heavy test (many processes at once, or timing that a starved machine would break) takes
/// this first: heavy tests run beside each other, as they did in their own binaries, but
/// never beside a real-model test ([`one_at_a_time`]).
pub fn heavy() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(PoisonError::into_inner)
}

/// A chat template under `config/templates/`.
pub fn template(name: &str) -> PathBuf {
    crate::workspace_root().join("config/templates").join(name)
}

/// Runs `command` to completion with stdout and stderr captured, killing it after `limit`;
/// `Err` (with what it printed so far) when the limit ran out, so a hang fails the test
/// instead of stalling it.
pub fn output_within(
    mut command: Command,
    limit: Duration,
) -> Result<std::process::Output, String> {
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {command:?}: {e}"))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => break None,
        }
    };
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        let out = stdout.join().unwrap_or_default();
        let err = stderr.join().unwrap_or_default();
        return Err(format!(
            "{command:?} did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(&err)
        ));
    };
    Ok(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

/// `boxctl --socket <the stack's loopd> ARGS...`, killed (and `Err`) after `limit`.
pub fn boxctl_within(
    stack: &crate::Stack,
    args: &[&str],
    limit: Duration,
) -> Result<std::process::Output, String> {
    let mut command = Command::new(crate::binary("boxctl"));
    command.arg("--socket").arg(&stack.socket).args(args);
    output_within(command, limit)
}

#[cfg(test)]
mod tests {
    use super::{MACHINE, heavy, one_at_a_time};

    #[test]
    fn a_real_model_test_runs_alone_and_heavy_tests_run_together() {
        let real = one_at_a_time();
        assert!(
            MACHINE.try_read().is_err(),
            "a heavy test ran beside a real one"
        );
        drop(real);
        let first = heavy();
        assert!(MACHINE.try_read().is_ok(), "heavy tests ran one at a time");
        assert!(
            MACHINE.try_write().is_err(),
            "a real test ran beside a heavy one"
        );
        drop(first);
    }
}
