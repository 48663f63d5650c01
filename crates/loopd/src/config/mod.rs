//! loopd's configuration: the TOML file (`config/loopd.toml`), `LOOPD_SECTION__KEY`
//! environment overrides, and the command-line flags, loaded with `bxconfig`.
//!
//! Every key has a default, so an empty file is a valid config. `docs/config.md` lists every
//! key with its unit and default.

mod api;
mod approvals;
mod budgets;
mod endpoints;
mod heartbeat;
mod kv;
mod llama;
mod memory;
mod schedules;
mod slots;
mod subagent;
mod turn;
mod web;

#[cfg(test)]
mod endpoint_tests;
#[cfg(test)]
mod tests;

pub use api::{Api, Broker};
pub use approvals::Approvals;
pub use budgets::{Budgets, SessionBudgets, TurnBudgets};
pub use endpoints::{
    DEFAULT_ENDPOINT_NAME, EndpointConfig, EndpointPlan, MAX_ENDPOINTS, Role, RoleSlots, plans,
};
pub use heartbeat::{
    HEARTBEAT_MIN_MS, HEARTBEAT_OFF, HEARTBEAT_PROMPT_FILE, Heartbeat, QUIET_REPLY,
};
pub use kv::{Kv, MAX_KV_FILES};
pub use llama::{DEFAULT_LLAMA_URL, Expect, Llama};
pub use memory::Memory;
pub use schedules::{
    CHECK_RUN_TIMES, DEFAULT_TIMEZONE, HEARTBEAT_SCHEDULE, MAX_NOTIFY_TO_BYTES,
    MAX_SCHEDULE_NAME_BYTES, MIN_EVERY_MS, Missed, NEW_SESSION, Notify, Schedule, TaskSource,
    Timing, check_notify_to, parse_cron, parse_every, parse_timezone,
};
pub use slots::{MAX_MAIN_SLOTS, MainSlots, Slots};
pub use subagent::Subagent;
pub use turn::{
    Baseline, CONFIGURED_RESULT_CAP_SLOT_DIVISOR, Compact, DERIVED_RESULT_CAP_MAX_BYTES,
    DERIVED_RESULT_CAP_SLOT_DIVISOR, Loop, RESULT_BYTES_PER_TOKEN, derived_result_cap_bytes,
    max_result_cap_bytes,
};
pub use web::{MAX_WEB_SESSIONS, Origin, Web};

use bxconfig::{LogConfig, Problem, Problems, Validate};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The prefix of loopd's environment overrides: `LOOPD_LLAMA__URL` sets `llama.url`.
pub const ENV_PREFIX: &str = "LOOPD";

/// loopd's whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// loopd's API socket (HTTP/1.1 over a Unix socket). Overridden by `--socket PATH`.
    pub socket: PathBuf,
    /// Where sessions and everything else loopd keeps live. Overridden by `--state-dir DIR`.
    pub state_dir: PathBuf,
    /// `[llama]`: the model server.
    pub llama: Llama,
    /// `[expect]`: what the model server must report.
    pub expect: Expect,
    /// `[slots]`: slot numbers by role.
    pub slots: Slots,
    /// `[loop]`: the limits of one turn.
    #[serde(rename = "loop")]
    pub r#loop: Loop,
    /// `[api]`: loopd's HTTP API.
    pub api: Api,
    /// `[broker]`: the tool broker.
    pub broker: Broker,
    /// `[baseline]`: the prompt files.
    pub baseline: Baseline,
    /// `[compact]`: compaction and summaries.
    pub compact: Compact,
    /// `[memory]`: durable notes in baselines.
    pub memory: Memory,
    /// `[heartbeat]`: the periodic turn on the `heartbeat` session.
    pub heartbeat: Heartbeat,
    /// `[subagent]`: children the model may start.
    pub subagent: Subagent,
    /// `[approvals]`: the wait for the owner's answer to a call brokerd asks about.
    pub approvals: Approvals,
    /// `[[schedules]]`: tasks loopd runs by itself at set times (`docs/schedules.md`).
    pub schedules: Vec<Schedule>,
    /// `[budgets]`: what a turn and a day may spend, and the usage accounts' day
    /// (`docs/budgets.md`).
    pub budgets: Budgets,
    /// `[metrics]`: the optional TCP listener of `/metrics` (`docs/metrics.md`).
    pub metrics: bxmetrics::MetricsConfig,
    /// `[web]`: the web console (`docs/web.md`); off unless `listen` is set.
    pub web: Web,
    /// `[kv]`: sessions' KV caches kept in files between turns (`docs/kv.md`).
    pub kv: Kv,
    /// `[log]`: the log level.
    pub log: LogConfig,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            socket: PathBuf::from("/run/boxmaker/loopd.sock"),
            state_dir: PathBuf::from("/var/lib/boxmaker/loopd"),
            llama: Llama::default(),
            expect: Expect::default(),
            slots: Slots::default(),
            r#loop: Loop::default(),
            api: Api::default(),
            broker: Broker::default(),
            baseline: Baseline::default(),
            compact: Compact::default(),
            memory: Memory::default(),
            heartbeat: Heartbeat::default(),
            subagent: Subagent::default(),
            approvals: Approvals::default(),
            schedules: Vec::new(),
            budgets: Budgets::default(),
            metrics: bxmetrics::MetricsConfig::default(),
            web: Web::default(),
            kv: Kv::default(),
            log: LogConfig::default(),
        }
    }
}

impl Config {
    /// The heartbeat as the schedule `heartbeat`; `Ok(None)` when it is off.
    pub fn heartbeat_schedule(&self) -> Result<Option<Schedule>, String> {
        self.heartbeat.schedule(&self.baseline.system)
    }
}

impl Validate for Config {
    fn validate(&self) -> Result<(), Vec<Problem>> {
        let mut p = Problems::new();
        p.socket_path("socket", &self.socket);
        p.path_non_empty("state_dir", &self.state_dir);
        self.llama.check(&mut p);
        endpoints::check(&self.llama, &self.slots, self.expect.slots, &mut p);
        self.expect.check(&mut p);
        self.slots.check(self.expect.slots, &mut p);
        self.r#loop.check(self.expect.n_ctx, &mut p);
        self.api.check(&mut p);
        self.broker.check(&mut p);
        self.baseline.check(&mut p);
        self.compact.check(&mut p);
        self.memory.check(&mut p);
        self.heartbeat.check(&mut p);
        self.subagent.check(&mut p);
        self.approvals.check(&mut p);
        schedules::check(&self.schedules, &mut p);
        self.budgets.check(&mut p);
        if let Err(e) = self.metrics.check() {
            p.push(e.key(), e.to_string());
        }
        self.web.check(&mut p);
        self.kv.check(&mut p);
        p.finish()
    }

    fn warnings(&self) -> Vec<Problem> {
        self.r#loop.warnings(self.expect.n_ctx)
    }

    fn notes(&self) -> Vec<String> {
        // The heartbeat is a schedule too; a bad `every` is a problem the check already named.
        let heartbeat = self.heartbeat_schedule().ok().flatten();
        let all: Vec<Schedule> = heartbeat
            .into_iter()
            .chain(self.schedules.iter().cloned())
            .collect();
        schedules::notes(&all, chrono::Utc::now())
    }
}
