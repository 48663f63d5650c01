//! The scheduler with a fake clock and a stand-in backend: no test sleeps; each advances the
//! clock and waits (bounded) on the scheduler's counts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod counted;
mod restart;
mod runs;
mod stub;

use super::clock::FakeClock;
use super::state::{self, SCHEDULES_FILE, ScheduleState, StateFile};
use super::{Paths, RunCounts, Scheduler, Spec};
use crate::config::Schedule;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::time::Duration;
use stub::Stub;

/// The longest a test waits for the scheduler to get somewhere, in milliseconds.
const WAIT_MS: u64 = 10_000;

fn utc(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

/// A spec from config lines (JSON object fields), with a task unless given.
fn spec(json: &str) -> Spec {
    let mut value: serde_json::Value = serde_json::from_str(json).unwrap();
    if value.get("task").is_none() && value.get("task_file").is_none() {
        value["task"] = "do the thing".into();
    }
    let schedule: Schedule = serde_json::from_value(value).unwrap();
    Spec::from_config(&schedule).unwrap()
}

/// A state dir, a clock and a stub; schedulers started over them.
struct Bed {
    dir: tempfile::TempDir,
    clock: Arc<FakeClock>,
    stub: Arc<Stub>,
}

impl Bed {
    fn at(start: &str) -> Bed {
        let dir = tempfile::tempdir().unwrap();
        let stub = Stub::new(dir.path().join(SCHEDULES_FILE));
        Bed {
            dir,
            clock: FakeClock::at(utc(start)),
            stub: Arc::new(stub),
        }
    }

    fn paths(&self) -> Paths {
        Paths {
            state: self.dir.path().join(SCHEDULES_FILE),
            notifications: self.dir.path().join(crate::journal::NOTIFICATIONS_FILE),
        }
    }

    fn start(&self, specs: Vec<Spec>) -> Scheduler<Stub> {
        Scheduler::start(
            Arc::clone(&self.stub),
            specs,
            self.paths(),
            Arc::clone(&self.clock) as Arc<dyn super::Clock>,
            crate::meter::ScheduleRuns::default(),
        )
        .unwrap()
    }

    fn state(&self) -> StateFile {
        state::load(&self.paths().state).unwrap()
    }

    fn write_state(&self, name: &str, s: ScheduleState) {
        let mut file = StateFile::default();
        file.schedules.insert(name.into(), s);
        state::save(&self.paths().state, &file).unwrap();
    }

    fn notifications(&self) -> Vec<proto::api::Notification> {
        crate::journal::read_all(&self.paths().notifications).unwrap()
    }

    fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }
}

/// Waits until `until` holds of the scheduler's counts.
async fn wait_counts<B: crate::api::Backend>(
    scheduler: &Scheduler<B>,
    until: impl Fn(&RunCounts) -> bool,
) -> RunCounts {
    let mut counts = scheduler.counts();
    *tokio::time::timeout(
        Duration::from_millis(WAIT_MS),
        counts.wait_for(|c| until(c)),
    )
    .await
    .expect("the scheduler got there in time")
    .unwrap()
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
