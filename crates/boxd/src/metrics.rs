//! boxd's metrics (`docs/metrics.md`): each child up, its restarts, its last exit status, when
//! its current process started and the time since; and `boxd_build_info` and the `process_*`
//! metrics ([`bxmetrics::process`]). The supervisor reports starts, readiness and restarts,
//! each child's reaper its exit; the uptime is computed at scrape time. The `child` label
//! takes the names of `[[children]]`, nothing else.

use bxmetrics::prometheus_client::metrics::counter::Counter;
use bxmetrics::prometheus_client::metrics::family::Family;
use bxmetrics::prometheus_client::metrics::gauge::Gauge;
use bxmetrics::prometheus_client::registry::{Registry, Unit};
use std::fmt;
use std::process::ExitStatus;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The exit status of a child killed by a signal: this plus the signal's number, as shells
/// report it.
pub const SIGNAL_EXIT_BASE: i64 = 128;

/// The label of one child.
type ChildLabel = [(&'static str, String); 1];

/// boxd's registry and its metrics, one series per configured child.
pub struct Metrics {
    registry: Registry,
    children: Vec<String>,
    up: Family<ChildLabel, Gauge>,
    restarts: Family<ChildLabel, Counter>,
    last_exit: Family<ChildLabel, Gauge>,
    uptime: Family<ChildLabel, Gauge<f64, AtomicU64>>,
    start_time: Family<ChildLabel, Gauge<f64, AtomicU64>>,
    /// When each child's current process started, by index; `None` while it has none.
    started: Mutex<Vec<Option<Instant>>>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("children", &self.children)
            .finish_non_exhaustive()
    }
}

/// The exit status `status` stands for: its code, or [`SIGNAL_EXIT_BASE`] plus the signal.
pub fn exit_status(status: &ExitStatus) -> Option<i64> {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Some(i64::from(code)),
        (None, Some(signal)) => Some(SIGNAL_EXIT_BASE + i64::from(signal)),
        (None, None) => None,
    }
}

impl Metrics {
    /// The metrics of the children named `children` (in config order): each down, never
    /// restarted, never started (start time 0), with no exit yet (its
    /// `boxd_child_last_exit_status` appears at its first).
    pub fn new(children: Vec<String>) -> Metrics {
        let mut registry = Registry::default();
        bxmetrics::process::register(&mut registry, "boxd", env!("CARGO_PKG_VERSION"));
        let up = Family::<ChildLabel, Gauge>::default();
        registry.register(
            "boxd_child_up",
            "1 while the child runs and is ready",
            up.clone(),
        );
        let restarts = Family::<ChildLabel, Counter>::default();
        registry.register(
            "boxd_child_restarts",
            "Times boxd started the child again after it died",
            restarts.clone(),
        );
        let last_exit = Family::<ChildLabel, Gauge>::default();
        registry.register(
            "boxd_child_last_exit_status",
            "The child's last exit: its code, or 128 plus the signal that killed it",
            last_exit.clone(),
        );
        let uptime = Family::<ChildLabel, Gauge<f64, AtomicU64>>::default();
        registry.register_with_unit(
            "boxd_child_uptime",
            "Time since the child's current start (0 while it has no process)",
            Unit::Seconds,
            uptime.clone(),
        );
        let start_time = Family::<ChildLabel, Gauge<f64, AtomicU64>>::default();
        registry.register_with_unit(
            "boxd_child_start_time",
            "When the child's latest process started, since the Unix epoch (0 before its first)",
            Unit::Seconds,
            start_time.clone(),
        );
        for name in &children {
            let label = [("child", name.clone())];
            up.get_or_create(&label).set(0);
            // Created at 0, so a child that never restarted has its series too.
            let _ = restarts.get_or_create(&label);
            uptime.get_or_create(&label).set(0.0);
            start_time.get_or_create(&label).set(0.0);
        }
        let started = Mutex::new(vec![None; children.len()]);
        Metrics {
            registry,
            children,
            up,
            restarts,
            last_exit,
            uptime,
            start_time,
            started,
        }
    }

    /// The label of child `index`; `None` for an index boxd has no child at.
    fn label(&self, index: usize) -> Option<ChildLabel> {
        self.children
            .get(index)
            .map(|name| [("child", name.clone())])
    }

    /// Child `index` has a new process, not ready yet.
    pub fn started(&self, index: usize) {
        let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = started.get_mut(index) {
            *slot = Some(Instant::now());
        }
        drop(started);
        if let Some(label) = self.label(index) {
            // A clock before 1970 reads as 0, as "never started" does.
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64());
            self.start_time.get_or_create(&label).set(now);
        }
    }

    /// Child `index` is ready: up, unless its process already exited (the supervisor may
    /// learn of readiness after the reaper saw the exit), or none was started.
    pub fn ready(&self, index: usize) {
        // Under the lock `exited` takes: an exit cannot come between the look and the set.
        let started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        if started.get(index).is_some_and(Option::is_some)
            && let Some(label) = self.label(index)
        {
            self.up.get_or_create(&label).set(1);
        }
    }

    /// boxd is about to start child `index` again after it died.
    pub fn restarting(&self, index: usize) {
        if let Some(label) = self.label(index) {
            self.restarts.get_or_create(&label).inc();
        }
    }

    /// Child `index`'s process exited with `status` (`None`: it could not be known).
    pub fn exited(&self, index: usize, status: Option<i64>) {
        // Held while `up` is set: `ready` looks at the start under it (see there).
        let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = started.get_mut(index) {
            *slot = None;
        }
        if let Some(label) = self.label(index) {
            self.up.get_or_create(&label).set(0);
            if let Some(status) = status {
                self.last_exit.get_or_create(&label).set(status);
            }
        }
        drop(started);
    }

    /// Sets each child's uptime from its start to now.
    fn refresh_uptime(&self) {
        let started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        for (name, start) in self.children.iter().zip(started.iter()) {
            let seconds = start.map_or(0.0, |s| s.elapsed().as_secs_f64());
            self.uptime
                .get_or_create(&[("child", name.clone())])
                .set(seconds);
        }
    }
}

impl bxmetrics::Source for Metrics {
    fn open_metrics(&self) -> Result<String, fmt::Error> {
        self.refresh_uptime();
        bxmetrics::exposition::open_metrics(&self.registry)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bxmetrics::Source;
    use std::os::unix::process::ExitStatusExt;

    /// The value of the sample `series` (name and labels, exactly as written) in `text`.
    fn sample(text: &str, series: &str) -> Option<f64> {
        text.lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            value.parse().ok()
        })
    }

    fn now() -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    }

    #[test]
    fn a_childs_start_time_is_when_its_latest_process_started() {
        let metrics = Metrics::new(vec!["a".into(), "b".into()]);
        let series = |child: &str| format!("boxd_child_start_time_seconds{{child=\"{child}\"}}");
        let text = metrics.open_metrics().unwrap();
        assert_eq!(sample(&text, &series("a")), Some(0.0), "{text}");
        let before = now();
        metrics.started(0);
        let after = now();
        let text = metrics.open_metrics().unwrap();
        let first = sample(&text, &series("a")).unwrap();
        assert!(
            before <= first && first <= after,
            "{before} {first} {after}"
        );
        assert_eq!(sample(&text, &series("b")), Some(0.0), "{text}");
        // It stays after an exit, and a restart moves it.
        metrics.exited(0, Some(1));
        let text = metrics.open_metrics().unwrap();
        assert_eq!(sample(&text, &series("a")), Some(first), "{text}");
        metrics.started(0);
        let text = metrics.open_metrics().unwrap();
        assert!(sample(&text, &series("a")).unwrap() >= first, "{text}");
    }

    #[test]
    fn build_info_and_the_process_metrics_are_served() {
        let text = Metrics::new(vec!["a".into()]).open_metrics().unwrap();
        let info = format!(
            "boxd_build_info{{version=\"{}\",",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.lines().any(|l| l.starts_with(&info)), "{text}");
        let text = bxmetrics::exposition::classic(&text);
        for name in bxmetrics::process::PROCESS_METRICS {
            assert!(sample(&text, name).is_some(), "no {name} in\n{text}");
        }
    }

    #[test]
    fn an_exit_by_signal_is_128_plus_the_signal() {
        assert_eq!(exit_status(&ExitStatus::from_raw(3 << 8)), Some(3));
        assert_eq!(exit_status(&ExitStatus::from_raw(9)), Some(137));
    }

    #[test]
    fn a_child_that_exited_before_it_was_seen_ready_is_not_up() {
        // The supervisor may see readiness after the reaper saw the exit (both were ready
        // in one select!): the exit wins.
        let metrics = Metrics::new(vec!["a".into()]);
        metrics.started(0);
        metrics.exited(0, Some(1));
        metrics.ready(0);
        let text = metrics.open_metrics().unwrap();
        assert!(text.contains("boxd_child_up{child=\"a\"} 0\n"), "{text}");
        // A child never started is not up either.
        metrics.ready(0);
        let text = metrics.open_metrics().unwrap();
        assert!(text.contains("boxd_child_up{child=\"a\"} 0\n"), "{text}");
    }

    #[test]
    fn a_child_is_up_once_ready_and_its_uptime_is_zero_when_it_has_no_process() {
        let metrics = Metrics::new(vec!["a".into()]);
        let text = metrics.open_metrics().unwrap();
        assert!(text.contains("boxd_child_up{child=\"a\"} 0\n"), "{text}");
        assert!(
            text.contains("boxd_child_uptime_seconds{child=\"a\"} 0.0\n"),
            "{text}"
        );
        assert!(!text.contains("boxd_child_last_exit_status{"), "{text}");
        metrics.started(0);
        metrics.ready(0);
        let text = metrics.open_metrics().unwrap();
        assert!(text.contains("boxd_child_up{child=\"a\"} 1\n"), "{text}");
        metrics.exited(0, Some(137));
        metrics.restarting(0);
        metrics.restarting(7);
        let text = metrics.open_metrics().unwrap();
        assert!(text.contains("boxd_child_up{child=\"a\"} 0\n"), "{text}");
        assert!(
            text.contains("boxd_child_last_exit_status{child=\"a\"} 137\n"),
            "{text}"
        );
        assert!(
            text.contains("boxd_child_restarts_total{child=\"a\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("boxd_child_uptime_seconds{child=\"a\"} 0.0\n"),
            "{text}"
        );
    }
}
