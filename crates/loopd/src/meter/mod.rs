//! loopd's meter: its Prometheus metrics ([`metrics`], docs/metrics.md) and its usage accounts
//! ([`usage`] in memory, [`store`] on disk; docs/budgets.md), fed by what turns spend.
//!
//! The engine keeps one [`Meter`] and gives each task a [`TaskMeter`] (the task's runtime
//! meter, where background work reports) whose [`TurnTally`] reads the turn's events as the
//! engine receives them. Accounts change in memory at each model call, tool call and turn end;
//! the engine writes the days that changed ([`Meter::save`]) after each turn and after each
//! piece of background work, never per event. Days are calendar days in `[budgets] timezone`,
//! read from a [`Clock`] the tests set.

mod day;
mod labels;
pub mod metrics;
#[cfg(test)]
pub(crate) mod promtool;
pub mod store;
mod task;
pub mod usage;

pub use metrics::{Metrics, Refusal, Role, Sampled};
pub use store::UsageError;
pub use task::{TaskMeter, TurnTally, counts};

use crate::config::Config;
use crate::zone::Zone;
use bxcore::SessionId;
use chrono::{DateTime, NaiveDate, Utc};
use proto::api::{UsageReport, UsageToday, UsageTotals};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use usage::Accounts;

/// Where the meter's time comes from: the system clock in loopd, a clock the tests set.
pub type Clock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The system clock.
pub fn system_clock() -> Clock {
    Arc::new(Utc::now)
}

/// loopd's metrics and usage accounts.
pub struct Meter {
    metrics: Metrics,
    accounts: Mutex<Accounts>,
    /// `<state_dir>/usage`.
    dir: PathBuf,
    days: day::Days,
    clock: Clock,
    /// Serialises writes of the day files, so the last write holds the latest accounts.
    writes: Mutex<()>,
    max_generated_tokens_per_day: Option<u64>,
}

impl Meter {
    /// The meter of `cfg`, its accounts loaded from `<state_dir>/usage` (made when missing).
    /// A day file that cannot be read is an error naming it: the accounts, and the day's
    /// budget counted from them, would be wrong without it.
    pub fn load(cfg: &Config, clock: Clock) -> Result<Meter, UsageError> {
        let dir = cfg.state_dir.join(store::USAGE_DIR);
        let days = store::load(&dir)?;
        let tz = crate::config::parse_timezone(&cfg.budgets.timezone).unwrap_or_else(|why| {
            // The config's check refuses this before loopd starts.
            tracing::warn!("budgets.timezone: {why}; counting days in UTC");
            Zone::utc()
        });
        Ok(Meter {
            metrics: Metrics::new(),
            accounts: Mutex::new(Accounts::from_days(days)),
            dir,
            days: day::Days::new(tz),
            clock,
            writes: Mutex::new(()),
            max_generated_tokens_per_day: cfg.budgets.max_generated_tokens_per_day,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Accounts> {
        self.accounts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The meter of a task of `session`, whose tools are `registry`.
    pub fn task<'a>(
        &'a self,
        session: SessionId,
        registry: &'a crate::tools::Registry,
    ) -> TaskMeter<'a> {
        TaskMeter::new(self, session, registry)
    }

    /// Today, in `[budgets] timezone`.
    pub fn today(&self) -> NaiveDate {
        self.days.day_of((self.clock)())
    }

    /// The time zone days are counted in.
    pub fn timezone(&self) -> &str {
        self.days.tz().name()
    }

    /// Adds `delta` to `session`'s account today.
    pub fn add(&self, session: &SessionId, delta: &UsageTotals) {
        let today = self.today();
        self.lock().add(today, session, delta);
    }

    /// Tokens every session generated today.
    pub fn generated_today(&self) -> u64 {
        let today = self.today();
        self.lock().day_totals(today).generated_tokens
    }

    /// Writes every day that changed since the last write, durably. A day that cannot be
    /// written stays to be written at the next save.
    pub fn save(&self) -> Result<(), UsageError> {
        let _one_writer = self.writes.lock().unwrap_or_else(|p| p.into_inner());
        let dirty = self.lock().take_dirty();
        let mut failed = None;
        for (day, sessions) in dirty {
            if let Err(e) = store::save(&self.dir, day, self.timezone(), sessions) {
                self.lock().unwritten(day);
                failed.get_or_insert(e);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// [`Meter::save`], a failure logged: for the engine after a turn and after background
    /// work (the next save tries again).
    pub fn save_or_warn(&self) {
        if let Err(e) = self.save() {
            tracing::warn!(error = %e, "cannot write the usage accounts; they are written at the next save");
        }
    }

    /// `GET /v1/usage`'s answer (see `UsageReport`).
    pub fn report(&self, session: Option<&SessionId>, day: Option<NaiveDate>) -> UsageReport {
        let today = self.today();
        self.lock().report(session, day, today, self.timezone())
    }

    /// Whether the accounts hold anything of `session`.
    pub fn knows(&self, session: &SessionId) -> bool {
        self.lock().knows(session)
    }

    /// Today's usage, as `GET /v1/status` shows it.
    pub fn usage_today(&self) -> UsageToday {
        let today = self.today();
        UsageToday {
            day: today.to_string(),
            timezone: self.timezone().to_string(),
            totals: self.lock().day_totals(today),
            max_generated_tokens_per_day: self.max_generated_tokens_per_day,
        }
    }

    /// A task was refused at submission, `why`.
    pub fn task_refused(&self, why: Refusal) {
        self.metrics.refused(why);
    }

    /// The metrics as OpenMetrics text, with the gauges sampled now set to `sampled`.
    pub fn open_metrics(&self, sampled: Sampled) -> Result<String, std::fmt::Error> {
        self.metrics.sample(sampled);
        bxmetrics::exposition::open_metrics(self.metrics.registry())
    }
}

/// Where the scheduler counts its runs (`loopd_schedule_runs_total`): the meter's metrics, or
/// nowhere (tests of the scheduler alone).
#[derive(Clone, Default)]
pub struct ScheduleRuns(Option<Arc<Meter>>);

impl ScheduleRuns {
    /// Runs counted in `meter`'s metrics.
    pub fn into_meter(meter: Arc<Meter>) -> ScheduleRuns {
        ScheduleRuns(Some(meter))
    }

    /// A run of schedule `name` ended `outcome` (a word of docs/metrics.md).
    pub fn ended(&self, name: &str, outcome: &'static str) {
        if let Some(meter) = &self.0 {
            meter.metrics.schedule_run(name, outcome);
        }
    }
}

#[cfg(test)]
mod tests;
