//! chatd, boxmaker's Matrix channel: a client of loopd's API, like boxctl, that reaches the
//! owner in Matrix rooms. The owner's messages become tasks in a room's session; the answers
//! come back to the room when the turn ends. Nobody else's message is ever a task.
//!
//! Modules: [`config`] (`config/chatd.toml`), [`store`] (the state directory), [`login`]
//! (signing in, keeping the session), [`policy`] (who may speak), [`names`] (a room's session,
//! a message's task id), [`incoming`] (what an event says), [`ledger`] (tasks handed over and answered), [`heard`] (others' words, for the owner's next task), [`history`]
//! (a turn read back from the log), [`reply`] (a turn's events as the
//! room's message), [`approvals`] (calls waiting for the owner, posted and answered in the room), [`posts`]
//! (which approval each post stands for, kept across restarts),
//! [`trust`] (an owner's devices the bot trusts), [`turn`] (following a task's turn), [`unposted`] (calls that wait with no post, posted at the start), [`catchup`] (a room read back after a restart), [`channel`] (the sync loop), [`notices`] (loopd's
//! notifications posted to rooms), [`daemon`] (the process). See `docs/chat.md`.

pub mod approvals;
pub mod catchup;
pub mod channel;
pub mod config;
pub mod daemon;
pub mod error;
pub mod heard;
pub mod history;
pub mod incoming;
pub mod ledger;
pub mod login;
pub mod names;
pub mod notices;
pub mod policy;
pub mod posts;
pub mod reply;
pub mod store;
pub mod trust;
pub mod turn;
pub mod unposted;
