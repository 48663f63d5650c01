//! What a turn runs with: the model server, the tools, the config ([`Runtime`]), how it is told
//! to stop ([`Stop`]), and what runs a child session ([`Children`]). Below `turn`, `compact`
//! and `summarise`, which all take a `Runtime`; the child runner is a trait so that `turn`
//! never imports `subagent`, which runs turns itself.

use crate::config::Config;
use crate::llama::Client;
use crate::outcome::CallOutcome;
use crate::session::Session;
use crate::tools::{Registry, ToolPort};
use bxcore::{CallId, TurnEnd, TurnEvent};
use std::sync::atomic::{AtomicBool, Ordering};

/// What a turn needs besides its session.
pub struct Runtime<'a> {
    /// loopd's config.
    pub cfg: &'a Config,
    /// The model server.
    pub client: &'a Client,
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
}

/// How a turn is told to stop early.
#[derive(Debug, Default)]
pub struct Stop {
    /// Set to cancel the turn (it ends as `cancelled`, or `interrupted` when `shutdown` is set).
    pub cancelled: AtomicBool,
    /// Set (before `cancelled`) when loopd is shutting down.
    pub shutdown: AtomicBool,
}

impl Stop {
    /// How the turn ends now that it was stopped.
    pub(crate) fn end(&self) -> TurnEnd {
        if self.shutdown.load(Ordering::SeqCst) {
            TurnEnd::Interrupted
        } else {
            TurnEnd::Cancelled
        }
    }

    pub(crate) fn is_set(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
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
