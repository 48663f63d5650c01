//! What a turn runs with: the model server, the tools, the config ([`Runtime`]), how it is told
//! to stop ([`Stop`]), what runs a child session ([`Children`]), where a call waits for the
//! owner's approval ([`Owner`]) and what counts its spending ([`Meter`]). Below `turn`,
//! `compact` and `summarise`, which all take a `Runtime`; the child runner, the owner and the
//! meter are traits so that `turn` never imports `subagent`, which runs turns itself, or
//! `engine`, which keeps the approvals desk, the main slot and the meter.

use crate::blocking::Blocking;
use crate::budget::Spend;
use crate::config::Config;
use crate::outcome::CallOutcome;
use crate::route::Targets;
use crate::session::Session;
use crate::tools::{Registry, ToolPort};
use bxcore::{ApprovalDecision, ApprovalId, CallId, ModelTimings, TurnEnd, TurnEvent, Usage};
use proto::api::{OwnerAnswer, PendingApproval};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// What a turn needs besides its session.
pub struct Runtime<'a> {
    /// loopd's config.
    pub cfg: &'a Config,
    /// Where each role's model calls go: an endpoint's client and slot (`route`).
    pub models: &'a Targets,
    /// How this thread waits for the clients' futures (turns run on threads of their own).
    pub blocking: &'a Blocking,
    /// Where tools that loopd does not answer itself go (brokerd, or `FakeTools`).
    pub port: &'a dyn ToolPort,
    /// The tools of this epoch.
    pub registry: &'a Registry,
    /// The system prompt text.
    pub system: &'a str,
    /// Tokens of context per slot, as llama-server reported it (`ServerInfo::n_ctx`):
    /// compaction is due at `[compact] threshold` of it.
    pub n_ctx: u32,
    /// What runs a `subagent` call's child session (`subagent::Subagents`).
    pub children: &'a dyn Children,
    /// Where a call brokerd asks about waits for the owner's answer: the engine's desk for a
    /// turn the engine runs, [`NoOwner`] where nobody can answer.
    pub owner: &'a dyn Owner,
    /// Where the turn reports what it spent (metrics and usage accounts) and learns what the
    /// day has spent (the day's budget): the engine's meter, [`NoMeter`] in tests that do not
    /// count.
    pub meter: &'a dyn Meter,
}

/// How a turn is told to stop early: the one way loopd cancels work. Waits select on its
/// token (a model call ends at once, not at the next poll); a subagent's stop is a
/// [`Stop::child`] of its parent's, so stopping the parent stops the child with no watcher.
/// It also carries what the top-level turn spent ([`Spend`]): a budget the turn or a child
/// reaches stops the top-level turn, which then ends `budget`.
#[derive(Debug, Clone)]
pub struct Stop {
    token: CancellationToken,
    /// Set before the token is cancelled when loopd is shutting down: the turn then ends
    /// `interrupted` rather than `cancelled`. Shared with the children.
    shutdown: Arc<AtomicBool>,
    /// What the top-level turn and its children spent, and its budgets. Shared with the
    /// children.
    spend: Arc<Spend>,
}

impl Default for Stop {
    fn default() -> Stop {
        let token = CancellationToken::new();
        Stop {
            spend: Arc::new(Spend::new(token.clone())),
            token,
            shutdown: Arc::default(),
        }
    }
}

impl Stop {
    /// A stop not yet set.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Cancels the turn (and its children): it ends `cancelled`.
    pub fn cancel(&self) {
        self.token.cancel();
    }

    /// Stops the turn (and its children) because loopd is shutting down: it ends
    /// `interrupted`.
    pub fn shut_down(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
        self.token.cancel();
    }

    /// Whether the turn was told to stop.
    pub fn is_set(&self) -> bool {
        self.token.is_cancelled()
    }

    /// How the turn ends now that it was stopped: `interrupted` at shutdown, `budget` when
    /// it reached one, else `cancelled`.
    pub fn end(&self) -> TurnEnd {
        if self.shutdown.load(Ordering::SeqCst) {
            TurnEnd::Interrupted
        } else if let Some(reached) = self.spend.reached() {
            TurnEnd::Budget {
                budget: reached.budget.to_string(),
                message: reached.message,
            }
        } else {
            TurnEnd::Cancelled
        }
    }

    /// What the top-level turn and its children spent, and its budgets.
    pub(crate) fn spend(&self) -> &Arc<Spend> {
        &self.spend
    }

    /// The token to select on while waiting.
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// A stop for a child's turn: set when this one is set (with this one's reason), and
    /// settable on its own (a child's timeout) without stopping this one.
    pub fn child(&self) -> Stop {
        Stop {
            token: self.token.child_token(),
            shutdown: Arc::clone(&self.shutdown),
            spend: Arc::clone(&self.spend),
        }
    }
}

/// What turns report their spending to, and ask about the day's: loopd's metrics and usage
/// accounts (`meter`). A trait so that `turn`, `compact` and `summarise` never import the
/// engine that keeps them. A turn's own model and tool calls reach the meter as the
/// [`TurnEvent`]s the engine receives; what runs outside a turn's events (the background
/// work: summaries, compaction) reports through the methods below, which count nothing by
/// default.
pub trait Meter: Sync {
    /// Tokens generated today (the budget's day, `[budgets] timezone`) by every session so
    /// far: what `[budgets] max_generated_tokens_per_day` is checked against.
    fn generated_today(&self) -> u64;

    /// A model call of background work (a summary, a compaction) answered: its token counts,
    /// the server's timings when it sent them, and how long the call took (µs).
    fn background_call(&self, _usage: &Usage, _timings: Option<&ModelTimings>, _model_us: u64) {}

    /// A piece of background work ended, `outcome` after `elapsed`.
    fn background_done(&self, _work: Background, _outcome: BackgroundOutcome, _elapsed: Duration) {}
}

/// A turn's meter that also counts the background work it runs inside the turn (a compaction
/// or summaries to make room, `compact::before_call`, `compact::make_room`) in the turn's
/// [`Spend`]: that work is not cut by the turn's budgets (a compaction cut short is no
/// compaction), but what it generated and evaluated counts, so a budget it reaches ends the
/// turn at its next step.
pub struct TurnWork<'a> {
    meter: &'a dyn Meter,
    spend: &'a Spend,
}

impl<'a> TurnWork<'a> {
    /// `meter`, with background calls counted in `stop`'s spend too.
    pub fn new(meter: &'a dyn Meter, stop: &'a Stop) -> TurnWork<'a> {
        TurnWork {
            meter,
            spend: &stop.spend,
        }
    }
}

impl Meter for TurnWork<'_> {
    fn generated_today(&self) -> u64 {
        self.meter.generated_today()
    }

    fn background_call(&self, usage: &Usage, timings: Option<&ModelTimings>, model_us: u64) {
        self.meter.background_call(usage, timings, model_us);
        self.spend.model_call(
            crate::budget::ModelSpend::counted(usage, timings),
            self.meter.generated_today(),
        );
    }

    fn background_done(&self, work: Background, outcome: BackgroundOutcome, elapsed: Duration) {
        self.meter.background_done(work, outcome, elapsed);
    }
}

/// Microseconds since `started`, as a model call's time is reported (`model_us`).
pub fn micros_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// Work that calls the model outside a turn's steps, on the background slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Background {
    /// An epoch condensed into a carry (`compact`).
    Compaction,
    /// One tool result's summary (`summarise`).
    Summary,
}

/// How a piece of background work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackgroundOutcome {
    /// It did what it was for with the model's answer.
    Ok,
    /// A compaction whose carry was made without the model (its answer failed): the new
    /// epoch began all the same.
    Mechanical,
    /// It failed: no summary, or no new epoch.
    Failed,
}

/// A meter that counts nothing: for tests and tools that run turns without the engine.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoMeter;

impl Meter for NoMeter {
    fn generated_today(&self) -> u64 {
        0
    }
}

/// Runs a task in a child session of `parent`, for its call `call`, to its end: what a
/// `subagent` call does. Stopping `stop` stops the child; its events reach `on_event`.
pub trait Children: Sync {
    /// The child's answer (or why there is none) as the call's outcome.
    fn run(
        &self,
        rt: &Runtime<'_>,
        parent: &Session,
        task: &str,
        call: CallId,
        stop: &Stop,
        on_event: &mut dyn FnMut(&TurnEvent),
    ) -> CallOutcome;
}

/// The owner's answer to a waiting call, as it reaches the turn that waits (from
/// `POST /v1/approvals/{id}` through the engine's desk).
#[derive(Debug)]
pub struct OwnerReply {
    /// The answer.
    pub answer: OwnerAnswer,
    /// The owner's reason, for a denial.
    pub reason: Option<String>,
    /// The user id of the peer that answered (`SO_PEERCRED`).
    pub uid: Option<u32>,
    /// Told the decision once the session log holds it, or why it could not be recorded: the
    /// API answers the owner only then.
    pub recorded: oneshot::Sender<Result<ApprovalDecision, String>>,
}

/// Where a turn's calls wait for the owner: the list the API shows and answers from, and the
/// main slot the turn gives back while it waits, for the owner or for brokerd's answer to a
/// call (so other sessions' turns run meanwhile).
pub trait Owner: Sync {
    /// Lists `asked` for the owner; the answer comes on the receiver. `Err(why)`: nobody can
    /// answer it here, and the call is not run.
    fn ask(&self, asked: PendingApproval) -> Result<oneshot::Receiver<OwnerReply>, String>;

    /// Takes approval `id` off the list once its wait ended without an answer (timeout,
    /// stop). `false`: an answer took it first, and is in its receiver.
    fn withdraw(&self, id: &ApprovalId) -> bool;

    /// Gives back the main slot the turn holds, for as long as it waits (for the owner, or
    /// for a call's result).
    fn release_slot(&self);

    /// Takes the main slot again, if the turn gave it back, before the turn goes on: after
    /// each call's result is in the log (so an approved call runs, and its result is kept,
    /// without waiting for the slot). `false`: it could not, because the turn was stopped
    /// meanwhile (loopd is shutting down, the task was cancelled); the turn must run nothing
    /// more.
    fn retake_slot(&self) -> bool;

    /// Whether nobody watches the turn (a schedule's run, and its subagents, which ask
    /// through their parent's owner): its calls' requests are written as notifications too.
    fn unattended(&self) -> bool {
        false
    }
}

/// What [`NoOwner`] answers: why a call that needs approval is void there.
pub const NO_OWNER: &str = "nobody can answer an approval here (this runtime has no engine)";

/// The owner of a runtime without the engine (benches, tests that build a [`Runtime`] by
/// hand, the background work after a turn): nobody can answer, so a call that needs the
/// owner's approval is void at once, and never waits.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoOwner;

impl Owner for NoOwner {
    fn ask(&self, _asked: PendingApproval) -> Result<oneshot::Receiver<OwnerReply>, String> {
        Err(NO_OWNER.to_string())
    }

    fn withdraw(&self, _id: &ApprovalId) -> bool {
        true
    }

    fn release_slot(&self) {}

    fn retake_slot(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_stop_follows_its_parent_with_the_parents_reason_but_not_the_other_way() {
        let parent = Stop::new();
        let child = parent.child();
        child.cancel();
        assert!(child.is_set());
        assert!(
            !parent.is_set(),
            "a child's timeout must not stop its parent"
        );

        let parent = Stop::new();
        let child = parent.child();
        let grandchild = child.child();
        parent.shut_down();
        assert!(child.is_set() && grandchild.is_set());
        assert_eq!(grandchild.end(), TurnEnd::Interrupted);
        let cancelled = Stop::new();
        cancelled.cancel();
        assert_eq!(cancelled.end(), TurnEnd::Cancelled);
    }

    #[test]
    fn a_wait_on_the_stop_ends_when_it_is_set_without_polling() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let stop = Stop::new();
        let child = stop.child();
        let woke = runtime.block_on(async {
            let waiting = tokio::spawn({
                let token = child.token().clone();
                async move { token.cancelled().await }
            });
            stop.cancel();
            tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await
        });
        assert!(matches!(woke, Ok(Ok(()))));
    }
}
