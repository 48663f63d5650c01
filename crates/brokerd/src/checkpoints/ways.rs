//! Which way brokerd records what an `exec` under `rw_paths` changes, and how often it took
//! each: through an overlay ([`super::layers`]) where the sandbox can mount one and the tree
//! allows it, else by snapshots ([`super::runs`]). For the status line.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The ways taken, and why the overlay way is not available when it is not.
#[derive(Debug, Default)]
pub struct ExecWays {
    overlay_unavailable: Mutex<Option<String>>,
    overlay_runs: AtomicU64,
    snapshot_runs: AtomicU64,
}

impl ExecWays {
    /// The trial of an overlay failed: why (the snapshot way serves every run).
    pub fn overlay_unavailable(&self, why: String) {
        *self
            .overlay_unavailable
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(why);
    }

    /// A run was recorded through an overlay.
    pub fn took_overlay(&self) {
        self.overlay_runs.fetch_add(1, Ordering::Relaxed);
    }

    /// A run was recorded by snapshots.
    pub fn took_snapshots(&self) {
        self.snapshot_runs.fetch_add(1, Ordering::Relaxed);
    }

    /// How many runs took each way: (overlay, snapshots).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.overlay_runs.load(Ordering::Relaxed),
            self.snapshot_runs.load(Ordering::Relaxed),
        )
    }

    /// For the status line: "; exec runs recorded: 2 through an overlay, 1 by snapshots",
    /// with why the overlay is unavailable when it is; empty before any run.
    pub fn describe(&self) -> String {
        let (overlay, snapshots) = self.counts();
        let unavailable = self
            .overlay_unavailable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut line = String::new();
        if overlay + snapshots > 0 {
            line = format!(
                "; exec runs recorded: {overlay} through an overlay, {snapshots} by snapshots"
            );
        }
        if let Some(why) = unavailable {
            line.push_str(&format!("; no overlay here ({why})"));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::ExecWays;

    #[test]
    fn the_status_says_nothing_before_a_run_then_counts_each_way_and_why_no_overlay() {
        let ways = ExecWays::default();
        assert_eq!(ways.describe(), "");
        ways.took_overlay();
        ways.took_overlay();
        ways.took_snapshots();
        assert_eq!(
            ways.describe(),
            "; exec runs recorded: 2 through an overlay, 1 by snapshots"
        );
        ways.overlay_unavailable("a trial run failed (exited with status 125)".to_owned());
        assert!(
            ways.describe()
                .ends_with("; no overlay here (a trial run failed (exited with status 125))"),
            "{}",
            ways.describe()
        );
    }
}
