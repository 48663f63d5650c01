//! A real Prometheus for the end-to-end tests: Debian's `prometheus`, unpacked into the cache
//! by `scripts/fetch-parts.sh` and named by `$PROMETHEUS`, scraping loopback targets every
//! second, and asked through its HTTP API (`/api/v1/query`, `/api/v1/targets`).

use crate::{READY_TIMEOUT_MS, Running};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Names the prometheus binary; `scripts/fetch-parts.sh --print-paths` prints it.
pub const PROMETHEUS_ENV: &str = "PROMETHEUS";
/// Set to `1` (as `scripts/test.sh` does) to make a missing Prometheus a failure, not a skip.
pub const REQUIRE_ENV: &str = "BOXMAKER_REQUIRE_PROMETHEUS";
/// How often Prometheus scrapes each target, in milliseconds: short, so a test waits seconds.
pub const SCRAPE_INTERVAL_MS: u64 = 1_000;
/// The longest one request to Prometheus' API may take, in milliseconds.
pub const HTTP_TIMEOUT_MS: u64 = 5_000;
/// The most bytes read of one answer of Prometheus' API.
pub const MAX_ANSWER_BYTES: u64 = 4 << 20;

/// The prometheus binary from `$PROMETHEUS`, else from `PATH`; `None` (with a note on stderr)
/// when there is none, unless [`REQUIRE_ENV`] is `1`, which makes it a panic.
pub fn binary_or_skip() -> Option<PathBuf> {
    let named = std::env::var_os(PROMETHEUS_ENV)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    let found = match named {
        Some(path) => Some(path).filter(|p| p.is_file()),
        None => std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("prometheus"))
                .find(|p| p.is_file())
        }),
    };
    if found.is_none() {
        let why = "PROMETHEUS must name Debian's prometheus binary (or one must be on PATH): run \
                   `eval \"$(scripts/fetch-parts.sh --print-paths prometheus)\"` and export \
                   PROMETHEUS (scripts/test.sh does)";
        assert!(std::env::var(REQUIRE_ENV).as_deref() != Ok("1"), "{why}");
        eprintln!("skipping a Prometheus test: {why}");
    }
    found
}

/// A loopback port nobody listened on a moment ago, for a daemon's `[metrics] listen` or
/// Prometheus' own web port.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One scrape target as Prometheus' `/api/v1/targets` reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetState {
    /// Its `job` label.
    pub job: String,
    /// `up`, `down` or `unknown` (not scraped yet).
    pub health: String,
    /// Why the last scrape failed; empty when it did not.
    pub last_error: String,
    /// The URL it scrapes.
    pub scrape_url: String,
}

/// A running Prometheus on a loopback port, with its config and storage in a temporary
/// directory; killed and reaped when dropped (the process goes before the directory).
pub struct Prometheus {
    running: Running,
    /// Its web and API port on 127.0.0.1.
    pub port: u16,
    /// Holds `prometheus.yml` and the TSDB.
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts `binary` scraping `targets` (job name, address; `GET /metrics` every
    /// [`SCRAPE_INTERVAL_MS`]) and waits (at most [`READY_TIMEOUT_MS`]) until `/-/ready`
    /// answers 200.
    pub fn start(binary: &Path, targets: &[(&str, SocketAddr)]) -> std::io::Result<Prometheus> {
        let dir = tempfile::tempdir()?;
        let config = dir.path().join("prometheus.yml");
        std::fs::write(&config, config_yaml(targets))?;
        let port = free_port()?;
        let mut command = Command::new(binary);
        command
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn");
        let mut running = Running::start(command)?;
        let deadline = Instant::now() + Duration::from_millis(READY_TIMEOUT_MS);
        while get(port, "/-/ready").map(|(status, _)| status).ok() != Some(200) {
            if let Some(status) = running.exited() {
                return Err(std::io::Error::other(format!(
                    "prometheus exited ({status}) before it was ready; its log is above"
                )));
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!(
                    "prometheus did not answer /-/ready on 127.0.0.1:{port} within \
                     {READY_TIMEOUT_MS} ms"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(Prometheus {
            running,
            port,
            _dir: dir,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.running.pid()
    }

    /// The `data` of a successful answer of the API at `path_and_query`.
    pub fn api(&self, path_and_query: &str) -> Result<Value, String> {
        let (status, body) =
            get(self.port, path_and_query).map_err(|e| format!("GET {path_and_query}: {e}"))?;
        let answer: Value = serde_json::from_str(&body)
            .map_err(|e| format!("GET {path_and_query}: {status}, not JSON ({e}): {body}"))?;
        if status != 200 || answer["status"] != "success" {
            return Err(format!("GET {path_and_query}: {status}: {body}"));
        }
        Ok(answer["data"].clone())
    }

    /// The instant vector of `promql` now: each series' labels (as JSON) and value.
    pub fn query(&self, promql: &str) -> Result<Vec<(Value, f64)>, String> {
        let data = self.api(&format!("/api/v1/query?query={}", percent_encode(promql)))?;
        let series = data["result"].as_array().cloned().unwrap_or_default();
        series
            .into_iter()
            .map(|s| {
                let value = s["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<f64>().ok())
                    .ok_or_else(|| format!("{promql}: a sample without a number: {s}"))?;
                Ok((s["metric"].clone(), value))
            })
            .collect()
    }

    /// The one value of `promql` (an aggregation such as `sum(...)`), or `None` while no
    /// series matches.
    pub fn value(&self, promql: &str) -> Result<Option<f64>, String> {
        let series = self.query(promql)?;
        match series.as_slice() {
            [] => Ok(None),
            [(_, value)] => Ok(Some(*value)),
            _ => Err(format!("{promql}: {} series, expected one", series.len())),
        }
    }

    /// The active targets and their health.
    pub fn targets(&self) -> Result<Vec<TargetState>, String> {
        let data = self.api("/api/v1/targets?state=active")?;
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        Ok(data["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|t| TargetState {
                job: text(&t["labels"]["job"]),
                health: text(&t["health"]),
                last_error: text(&t["lastError"]),
                scrape_url: text(&t["scrapeUrl"]),
            })
            .collect())
    }
}

/// Prometheus' config: every target scraped each [`SCRAPE_INTERVAL_MS`], with a timeout no
/// longer than that (Prometheus refuses a timeout above the interval).
fn config_yaml(targets: &[(&str, SocketAddr)]) -> String {
    let mut yaml = format!(
        "global:\n  scrape_interval: {SCRAPE_INTERVAL_MS}ms\n  scrape_timeout: \
         {SCRAPE_INTERVAL_MS}ms\nscrape_configs:\n"
    );
    for (job, address) in targets {
        yaml.push_str(&format!(
            "  - job_name: {job:?}\n    static_configs:\n      - targets: [\"{address}\"]\n"
        ));
    }
    yaml
}

/// `GET path_and_query` from 127.0.0.1:`port` as HTTP/1.0, so the answer is not chunked and
/// ends when the server closes: its status and body.
pub(crate) fn get(port: u16, path_and_query: &str) -> std::io::Result<(u16, String)> {
    let timeout = Some(Duration::from_millis(HTTP_TIMEOUT_MS));
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(timeout)?;
    stream.set_write_timeout(timeout)?;
    stream.write_all(
        format!("GET {path_and_query} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes(),
    )?;
    let mut answer = Vec::new();
    stream.take(MAX_ANSWER_BYTES).read_to_end(&mut answer)?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no end of the head in: {answer}")))?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in: {head}")))?;
    Ok((status, body.to_string()))
}

/// `text` with every byte but the URL's unreserved ones percent-encoded, for a query string.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn a_query_is_percent_encoded() {
        assert_eq!(
            super::percent_encode("sum(a_total{outcome=\"done\"})"),
            "sum%28a_total%7Boutcome%3D%22done%22%7D%29"
        );
    }

    #[test]
    fn each_target_is_a_job_scraped_every_interval() {
        let yaml = super::config_yaml(&[("loopd", "127.0.0.1:9464".parse().unwrap())]);
        assert!(yaml.contains("scrape_interval: 1000ms\n"), "{yaml}");
        assert!(
            yaml.contains("- job_name: \"loopd\"\n    static_configs:\n      - targets: [\"127.0.0.1:9464\"]\n"),
            "{yaml}"
        );
    }
}
