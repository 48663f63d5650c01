//! What every daemon's registry holds besides its own series: `<daemon>_build_info` (which
//! build runs) and the standard `process_*` metrics of the process that serves them, read from
//! `/proc/self` at each scrape, as Prometheus' own client libraries name them.
//!
//! [`register`] adds both to a registry; each daemon calls it once, with its name and version.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::registry::Registry;

/// The environment variable, read at build time, that names the commit a build was made from
/// (the flake sets it from its source's revision; a plain `cargo build` leaves it unset).
pub const GIT_COMMIT_ENV: &str = "BOXMAKER_GIT_COMMIT";

/// The commit a build was made from, as [`GIT_COMMIT_ENV`] said at build time.
const BUILD_COMMIT: Option<&str> = option_env!("BOXMAKER_GIT_COMMIT");

/// The `commit` label of a build whose commit is not known, or not a commit name.
pub const UNKNOWN_COMMIT: &str = "unknown";

/// The longest commit name the `commit` label takes, in bytes (a SHA-256 commit id in hex,
/// with room for a `-dirty` suffix).
pub const MAX_COMMIT_BYTES: usize = 64 + 6;

/// The names of the `process_*` metrics [`register`] adds, as a scrape shows them.
pub const PROCESS_METRICS: [&str; 6] = [
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_start_time_seconds",
    "process_open_fds",
    "process_max_fds",
];

/// The labels of `<daemon>_build_info`.
type BuildLabels = [(&'static str, String); 2];

/// Adds `<daemon>_build_info{version, commit}` (always 1) and the `process_*` metrics of this
/// process to `registry`. `daemon` is the metrics' prefix (`loopd`), `version` the daemon's
/// crate version (`env!("CARGO_PKG_VERSION")`).
pub fn register(registry: &mut Registry, daemon: &str, version: &str) {
    let info = Family::<BuildLabels, Gauge>::default();
    registry.register(
        format!("{daemon}_build_info"),
        format!("The {daemon} build that runs: its version and commit (always 1)"),
        info.clone(),
    );
    let labels = [
        ("version", label_value(version)),
        ("commit", commit_label(BUILD_COMMIT)),
    ];
    info.get_or_create(&labels).set(1);
    registry.register_collector(Box::new(ProcessCollector));
}

/// The `commit` label of `commit`: itself when it is a commit name (hex digits, letters, `-`,
/// `.`; at most [`MAX_COMMIT_BYTES`]), else [`UNKNOWN_COMMIT`].
fn commit_label(commit: Option<&str>) -> String {
    match commit.map(str::trim) {
        Some(c) if !c.is_empty() && c.len() <= MAX_COMMIT_BYTES && safe(c) => c.to_string(),
        _ => UNKNOWN_COMMIT.to_string(),
    }
}

/// `text` as a label value: `prometheus-client` writes label values unescaped, so anything
/// but letters, digits, `-`, `.`, `+` and `_` becomes `_`.
fn label_value(text: &str) -> String {
    text.chars()
        .map(|c| if safe_char(c) { c } else { '_' })
        .collect()
}

/// Whether every character of `text` is [`safe_char`].
fn safe(text: &str) -> bool {
    text.chars().all(safe_char)
}

/// A character a label value may hold as it is.
fn safe_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '+' | '_')
}

/// The `process_*` metrics, read from `/proc/self` at each scrape.
#[derive(Debug)]
struct ProcessCollector;

/// What `/proc/self` said at one scrape.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessSample {
    /// User and system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Resident memory, in bytes.
    pub resident_bytes: u64,
    /// Virtual memory, in bytes.
    pub virtual_bytes: u64,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: f64,
    /// Open file descriptors.
    pub open_fds: u64,
    /// The soft limit of open file descriptors; `None` when unlimited.
    pub max_fds: Option<u64>,
}

/// Reads this process's [`ProcessSample`] from `/proc/self`.
pub fn sample() -> procfs::ProcResult<ProcessSample> {
    let me = procfs::process::Process::myself()?;
    let stat = me.stat()?;
    // Tick and page counts are far below 2^53: the conversions are exact.
    let ticks = procfs::ticks_per_second() as f64;
    let boot = procfs::boot_time_secs()? as f64;
    let max_fds = match me.limits()?.max_open_files.soft_limit {
        procfs::process::LimitValue::Value(n) => Some(n),
        procfs::process::LimitValue::Unlimited => None,
    };
    Ok(ProcessSample {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        resident_bytes: stat.rss.saturating_mul(procfs::page_size()),
        virtual_bytes: stat.vsize,
        start_time_seconds: boot + stat.starttime as f64 / ticks,
        open_fds: me.fd_count()? as u64,
        max_fds,
    })
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = match sample() {
            Ok(s) => s,
            Err(e) => {
                // A scrape without them is better than none.
                tracing::debug!("metrics: cannot read /proc/self: {e}");
                return Ok(());
            }
        };
        let counter = ConstCounter::new(s.cpu_seconds);
        counter.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            counter.metric_type(),
        )?)?;
        let resident = "Resident memory size in bytes.";
        gauge(
            &mut encoder,
            "process_resident_memory_bytes",
            resident,
            s.resident_bytes,
        )?;
        let virt = "Virtual memory size in bytes.";
        gauge(
            &mut encoder,
            "process_virtual_memory_bytes",
            virt,
            s.virtual_bytes,
        )?;
        let start = "Start time of the process since unix epoch in seconds.";
        gauge(
            &mut encoder,
            "process_start_time_seconds",
            start,
            s.start_time_seconds,
        )?;
        let open = "Number of open file descriptors.";
        gauge(&mut encoder, "process_open_fds", open, s.open_fds)?;
        if let Some(max) = s.max_fds {
            let help = "Maximum number of open file descriptors.";
            gauge(&mut encoder, "process_max_fds", help, max)?;
        }
        Ok(())
    }
}

/// Writes the gauge `name` with `value`.
fn gauge<N: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> Result<(), std::fmt::Error> {
    let gauge = ConstGauge::new(value);
    gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
