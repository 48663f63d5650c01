//! chromedriver for [`super::Browser`]: started on a free loopback port in a process group of
//! its own, asked (bounded) until it is ready, given a session on Chromium, and killed with
//! every Chromium process when dropped.

use super::{CHROMIUM_ARGS, COMMAND_TIMEOUT_MS, POLL_MS, STARTUP_TIMEOUT_MS};
use crate::Running;
use bytes::Bytes;
use fantoccini::{Client, ClientBuilder};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::future::Future;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// How many times [`Driver::start`] tries a fresh port when chromedriver exits before it is
/// ready (another process may take the port between our probe and chromedriver's bind).
const START_ATTEMPTS: u32 = 3;
/// chromedriver's own log (`--log-path`), in the browser's temporary directory.
pub(super) const DRIVER_LOG: &str = "chromedriver.log";
/// chromedriver's stderr, and so Chromium's, in the browser's temporary directory.
pub(super) const DRIVER_STDERR: &str = "chromedriver.stderr";
/// How many lines of each log a failed start shows.
const LOG_TAIL_LINES: usize = 12;
/// The longest one `/status` question may take, in milliseconds.
const STATUS_TIMEOUT_MS: u64 = 2_000;

/// A running chromedriver; dropping it kills its whole process group (Chromium's processes
/// are in it), then chromedriver itself is killed and reaped.
pub(super) struct Driver {
    running: Running,
    /// `http://127.0.0.1:PORT`, its WebDriver endpoint.
    url: String,
}

/// Why chromedriver did not start; `exited` when it ended early (a port taken, say), which a
/// fresh port may cure.
struct StartError {
    message: String,
    exited: bool,
}

impl Driver {
    /// Starts `chromedriver` with its log and stderr in `dir` ([`DRIVER_LOG`],
    /// [`DRIVER_STDERR`]) and waits until it is ready, on a fresh port again when it exits
    /// early; the error carries the logs' last lines.
    pub(super) fn start(
        runtime: &tokio::runtime::Runtime,
        chromedriver: &Path,
        dir: &Path,
    ) -> Result<Driver, String> {
        let mut attempt = 1;
        loop {
            match Driver::start_once(runtime, chromedriver, dir) {
                Ok(driver) => return Ok(driver),
                Err(e) if attempt < START_ATTEMPTS && e.exited => attempt += 1,
                Err(e) => return Err(with_log(&e.message, dir)),
            }
        }
    }

    /// One try of [`Driver::start`]: a free port, then `/status` until it says ready, at most
    /// [`STARTUP_TIMEOUT_MS`].
    fn start_once(
        runtime: &tokio::runtime::Runtime,
        chromedriver: &Path,
        dir: &Path,
    ) -> Result<Driver, StartError> {
        let failed = |message: String| StartError {
            message,
            exited: false,
        };
        let port = crate::prometheus::free_port()
            .map_err(|e| failed(format!("no free loopback port: {e}")))?;
        let mut command = Command::new(chromedriver);
        command
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", dir.join(DRIVER_LOG).display()))
            .process_group(0);
        let running = Running::start_logged(command, &dir.join(DRIVER_STDERR))
            .map_err(|e| failed(format!("cannot run {}: {e}", chromedriver.display())))?;
        let mut driver = Driver {
            running,
            url: format!("http://127.0.0.1:{port}"),
        };
        let deadline = Instant::now() + Duration::from_millis(STARTUP_TIMEOUT_MS);
        loop {
            if let Some(status) = driver.running.exited() {
                return Err(StartError {
                    message: format!("chromedriver exited ({status}) before it was ready"),
                    exited: true,
                });
            }
            if ready(runtime, &driver.url) {
                return Ok(driver);
            }
            if Instant::now() > deadline {
                return Err(failed(format!(
                    "chromedriver did not answer ready on {}/status within \
                     {STARTUP_TIMEOUT_MS} ms",
                    driver.url
                )));
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
    }

    /// Opens a WebDriver session on a fresh headless `chromium` ([`CHROMIUM_ARGS`], its
    /// profile in `dir/profile`), at most [`STARTUP_TIMEOUT_MS`].
    pub(super) fn session(
        &self,
        runtime: &tokio::runtime::Runtime,
        chromium: &Path,
        dir: &Path,
    ) -> Result<Client, String> {
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", dir.join("profile").display()));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium, "args": args },
            "timeouts": {
                "implicit": 0,
                "pageLoad": COMMAND_TIMEOUT_MS,
                "script": COMMAND_TIMEOUT_MS,
            },
        });
        let Value::Object(capabilities) = capabilities else {
            return Err("the capabilities are not a JSON object".to_string());
        };
        let connect = async {
            ClientBuilder::new(HttpConnector::new())
                .capabilities(capabilities)
                .connect(&self.url)
                .await
                .map_err(|e| e.to_string())
        };
        bounded(runtime, STARTUP_TIMEOUT_MS, connect)
            .and_then(|made| made)
            .map_err(|e| with_log(&format!("no WebDriver session: {e}"), dir))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Whatever is left of chromedriver's process group (Chromium's processes with it)
        // goes; then `running` (dropped after this) kills and reaps chromedriver itself, whose
        // process keeps the group's id from being reused until then.
        if let Ok(pid) = i32::try_from(self.running.pid()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Whether chromedriver at `url` answers `/status` with `"ready": true` (one try, bounded).
fn ready(runtime: &tokio::runtime::Runtime, url: &str) -> bool {
    let Ok(uri) = format!("{url}/status").parse::<hyper::Uri>() else {
        return false;
    };
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Empty<Bytes>>();
    let ask = async {
        let answer = client.get(uri).await.ok()?;
        let body = answer.into_body().collect().await.ok()?.to_bytes();
        serde_json::from_slice::<Value>(&body).ok()
    };
    matches!(
        bounded(runtime, STATUS_TIMEOUT_MS, ask),
        Ok(Some(status)) if status["value"]["ready"] == Value::Bool(true)
    )
}

/// Runs `future` on `runtime`, failing after `timeout_ms`.
pub(super) fn bounded<T>(
    runtime: &tokio::runtime::Runtime,
    timeout_ms: u64,
    future: impl Future<Output = T>,
) -> Result<T, String> {
    // The timer is made inside the runtime, which it needs.
    let limited = async { tokio::time::timeout(Duration::from_millis(timeout_ms), future).await };
    runtime
        .block_on(limited)
        .map_err(|_| format!("no answer within {timeout_ms} ms"))
}

/// `message` with the last lines of chromedriver's log and stderr in `dir` (which goes with
/// the failed start: the lines are all that is left of them).
fn with_log(message: &str, dir: &Path) -> String {
    let mut full = message.to_string();
    for name in [DRIVER_LOG, DRIVER_STDERR] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.is_empty() {
            full.push_str(&format!("\n  {name}: empty"));
        } else {
            let tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n    ");
            full.push_str(&format!("\n  the last lines of {name}:\n    {tail}"));
        }
    }
    full
}
