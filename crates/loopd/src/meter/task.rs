//! One task's meter: what the engine gives a task's [`crate::runtime::Runtime`] (its
//! background work reports there) and the [`TurnTally`] that reads its turn's events as the
//! engine receives them. Everything a task spends goes to its session's account, its
//! subagents' spending included (their events arrive wrapped in `TurnEvent::Subagent`): what an
//! owner asks of a session is what its tasks cost.

use super::Meter;
use super::metrics::{CallCounts, Role, UNKNOWN_TOOL};
use super::usage::add_totals;
use crate::budget::ModelSpend;
use crate::runtime::{Background, BackgroundOutcome};
use crate::tools::{Registry, target_tool};
use bxcore::{CallId, ModelTimings, SessionId, ToolCall, TurnEvent, Usage};
use proto::api::UsageTotals;
use std::borrow::Cow;
use std::time::{Duration, Instant};

/// The meter of one task of `session`, whose tools are `registry`.
pub struct TaskMeter<'a> {
    meter: &'a Meter,
    session: SessionId,
    registry: &'a Registry,
}

impl<'a> TaskMeter<'a> {
    /// The meter of a task of `session` with the tools of `registry`.
    pub fn new(meter: &'a Meter, session: SessionId, registry: &'a Registry) -> TaskMeter<'a> {
        TaskMeter {
            meter,
            session,
            registry,
        }
    }

    /// A tally of the task's turn, fed its events.
    pub fn tally(&self) -> TurnTally<'_> {
        TurnTally {
            task: self,
            started: None,
            calls: Vec::new(),
            pending: UsageTotals::default(),
        }
    }

    /// The label of a call to `call.name`: the tool it asks to run (`call_tool`'s target) when
    /// the registry or loopd knows it, [`UNKNOWN_TOOL`] otherwise.
    fn tool_label(&self, call: &ToolCall) -> Cow<'static, str> {
        let target = target_tool(&call.name, &call.arguments);
        let known =
            self.registry.get(&target).is_some() || proto::LOOPD_TOOLS.contains(&target.as_str());
        if known {
            Cow::Owned(target)
        } else {
            Cow::Borrowed(UNKNOWN_TOOL)
        }
    }

    /// A model call of `role` answered: counted in the metrics; what it adds to the account.
    fn model_call(
        &self,
        role: Role,
        usage: &Usage,
        timings: Option<&ModelTimings>,
        model_us: u64,
    ) -> UsageTotals {
        let counts = counts(usage, timings, model_us);
        self.meter.metrics().model_call(role, &counts);
        UsageTotals {
            model_calls: 1,
            evaluated_tokens: counts.evaluated,
            cached_tokens: counts.cached,
            generated_tokens: counts.generated,
            model_ms: model_us.saturating_add(500) / 1000,
            ..UsageTotals::default()
        }
    }
}

impl crate::runtime::Meter for TaskMeter<'_> {
    fn generated_today(&self) -> u64 {
        self.meter.generated_today()
    }

    fn background_call(&self, usage: &Usage, timings: Option<&ModelTimings>, model_us: u64) {
        let spent = self.model_call(Role::Background, usage, timings, model_us);
        self.meter.add(&self.session, &spent);
    }

    fn background_done(&self, work: Background, outcome: BackgroundOutcome, elapsed: Duration) {
        self.meter
            .metrics()
            .background(work == Background::Compaction, outcome, elapsed);
    }
}

/// What a model call counted: llama-server's own timings (`prompt_n`, `cache_n`,
/// `predicted_n`, and `predicted_ms` for the speed), or the usage's counts when the server sent
/// no timings (then nothing for the speed). The evaluated and
/// generated tokens are the budgets' ([`ModelSpend::counted`], the one place they are
/// defined), so the accounts, the metrics and the budgets never disagree about a call.
pub fn counts(usage: &Usage, timings: Option<&ModelTimings>, model_us: u64) -> CallCounts {
    let spent = ModelSpend::counted(usage, timings);
    match timings {
        Some(t) => {
            // A generation the server did not time (0 ms) is in neither speed counter.
            let timed = t.predicted_ms.is_finite() && t.predicted_ms > 0.0;
            CallCounts {
                evaluated: spent.evaluated,
                cached: t.cache_n,
                generated: spent.generated,
                timed_generated: if timed { t.predicted_n } else { 0 },
                generation_seconds: if timed { t.predicted_ms / 1000.0 } else { 0.0 },
                model_us,
            }
        }
        None => CallCounts {
            evaluated: spent.evaluated,
            cached: usage.cached_tokens,
            generated: spent.generated,
            timed_generated: 0,
            generation_seconds: 0.0,
            model_us,
        },
    }
}

/// One task's turn as its events tell it: when it started, the tool of each call not yet
/// answered (a result names only its call: its key is the child session it ran in, `None` for
/// the turn's own, and its number there), and what it spent since the accounts last heard.
/// The accounts are told at each model call (the day's budget reads them right after), at the
/// turn's end and when the tally is dropped: a tool call waits for the next of those.
pub struct TurnTally<'a> {
    task: &'a TaskMeter<'a>,
    started: Option<Instant>,
    /// The calls waiting for their results: few at once (one, or one per open child).
    calls: Vec<(Option<SessionId>, CallId, Cow<'static, str>)>,
    pending: UsageTotals,
}

impl TurnTally<'_> {
    /// Counts what `event` tells. A `ModelDone` is in the accounts when this returns, so the
    /// day's budget, read right after, sees it.
    pub fn event(&mut self, event: &TurnEvent) {
        self.seen(None, event);
    }

    /// Tells the accounts what was spent since they last heard.
    fn flush(&mut self) {
        if self.pending != UsageTotals::default() {
            let pending = std::mem::take(&mut self.pending);
            self.task.meter.add(&self.task.session, &pending);
        }
    }

    fn seen(&mut self, child: Option<&SessionId>, event: &TurnEvent) {
        let task = self.task;
        match event {
            TurnEvent::Started { .. } if child.is_none() => self.started = Some(Instant::now()),
            TurnEvent::ModelDone {
                usage,
                model_us,
                timings,
            } => {
                let role = if child.is_some() {
                    Role::Subagent
                } else {
                    Role::Main
                };
                let spent = task.model_call(role, usage, timings.as_ref(), *model_us);
                add_totals(&mut self.pending, &spent);
                self.flush();
            }
            TurnEvent::ToolCall { call, tool_call } => {
                let label = task.tool_label(tool_call);
                self.calls.push((child.cloned(), *call, label));
            }
            TurnEvent::ToolResult { call, outcome, .. } => {
                let waiting = self
                    .calls
                    .iter()
                    .position(|(c, n, _)| c.as_ref() == child && n == call);
                let label = match waiting {
                    Some(at) => self.calls.swap_remove(at).2,
                    None => Cow::Borrowed(UNKNOWN_TOOL),
                };
                task.meter.metrics().tool_call(label, outcome);
                self.pending.tool_calls = self.pending.tool_calls.saturating_add(1);
            }
            // A child's turn is part of the call that ran it: only the task's own turn counts.
            TurnEvent::Ended { end, .. } if child.is_none() => {
                let took = self.started.map_or(Duration::ZERO, |at| at.elapsed());
                task.meter.metrics().turn(end, took);
                self.pending.turns = self.pending.turns.saturating_add(1);
                self.flush();
            }
            TurnEvent::Subagent { session, event } => self.seen(Some(session), event),
            _ => {}
        }
    }
}

impl Drop for TurnTally<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}
