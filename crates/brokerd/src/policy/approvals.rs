//! The approvals brokerd minted: each bound to one session, one tool and one argument digest,
//! used at most once, refused once older than `[approvals] expire_ms`; and the turn allowances
//! an approval used with `for_turn` leaves behind.
//!
//! The pending approvals are kept in brokerd's state dir too ([`kept`], issue 33): a brokerd
//! that restarts while the owner decides still accepts the approval the owner gives, within
//! its expiry, so the owner is never told "approved" for a call a restart made unrunnable. An
//! approval is on disk before it is asked about, and off it before its call runs. Used
//! approvals and turn allowances live in memory only (lost, they make brokerd refuse or ask
//! again: the safe way). A table made with [`ApprovalTable::new`] keeps nothing (tests).
//! Expired entries are pruned at every use of the table; what it keeps is bounded by
//! `[approvals] max_pending` (outstanding approvals), [`MAX_REMEMBERED_USED`] (used ones,
//! remembered to say so) and [`MAX_TURN_ALLOWANCES`].

use crate::audit::args_sha256;
use crate::config::ApprovalSettings;
use bxcore::{ApprovalId, SessionId};
use proto::ToolRequest;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

pub mod kept;

use kept::{Kept, KeptApproval, unix_ms_now};

/// What every approval id starts with.
pub const APPROVAL_ID_PREFIX: &str = "ap-";

/// How many random characters (`[a-z0-9]`) follow [`APPROVAL_ID_PREFIX`].
pub const APPROVAL_ID_RANDOM_CHARS: usize = 12;

/// The most used approvals remembered (until they would have expired), so a replay is refused
/// as "used already" rather than "unknown"; past it the oldest is forgotten (and a replay of
/// it is refused as unknown: refused all the same).
pub const MAX_REMEMBERED_USED: usize = 4_096;

/// The most turn allowances kept at once (one per session, turn and tool); past it the oldest
/// is forgotten, and its tool asks again.
pub const MAX_TURN_ALLOWANCES: usize = 4_096;

/// The characters of an id's random part.
const ID_ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// How many fresh ids are drawn before minting gives up (one that is taken is drawn again;
/// with 36^12 ids, a second draw practically never happens).
const MINT_ATTEMPTS: usize = 8;

/// What one minted approval is bound to.
#[derive(Debug, Clone)]
struct Minted {
    session: SessionId,
    tool: String,
    /// Hex SHA-256 of the arguments text, as the audit log's `args_sha256`.
    args_sha256: String,
    minted: Instant,
    /// The same moment as wall-clock time (milliseconds since the Unix epoch), for the file.
    minted_unix_ms: u64,
}

/// The key of a turn allowance.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TurnTool {
    session: SessionId,
    turn: u64,
    tool: String,
}

/// A turn allowance: the approval that granted it, and when.
#[derive(Debug, Clone)]
struct Allowance {
    approval: ApprovalId,
    granted: Instant,
}

/// Why an approval sent with a call is refused, in brokerd's words (never the arguments).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Not in the table: never minted by this brokerd, expired and forgotten, or used before
    /// brokerd restarted (used ones are remembered in memory only; pending ones are kept).
    #[error(
        "approval {0} is unknown to this brokerd: it never minted it, it expired, or it was \
         used before brokerd restarted"
    )]
    Unknown(ApprovalId),
    /// Used already: an approval runs one call.
    #[error("approval {0} was used already: an approval runs one call only")]
    Used(ApprovalId),
    /// Older than `[approvals] expire_ms`.
    #[error("approval {id} expired: it was minted over {expire_ms} ms ago (approvals.expire_ms)")]
    Expired {
        /// The approval.
        id: ApprovalId,
        /// How long it held.
        expire_ms: u64,
    },
    /// Minted for a call of another session.
    #[error(
        "approval {id} was minted for session {:?}, not {:?}",
        .minted.as_str(),
        .sent.as_str()
    )]
    OtherSession {
        /// The approval.
        id: ApprovalId,
        /// The session it is bound to.
        minted: SessionId,
        /// The session of the call that sent it.
        sent: SessionId,
    },
    /// Minted for a call of another tool.
    #[error("approval {id} was minted for tool {minted:?}, not {sent:?}")]
    OtherTool {
        /// The approval.
        id: ApprovalId,
        /// The tool it is bound to.
        minted: String,
        /// The tool of the call that sent it.
        sent: String,
    },
    /// Minted for other arguments (their digests differ).
    #[error(
        "approval {0} was minted for other arguments (the SHA-256 of these differs): the \
         owner approved another call"
    )]
    OtherArguments(ApprovalId),
    /// Its use could not be written to the state dir, so the call does not run (a restart
    /// would find it pending again).
    #[error("approval {id} cannot be marked used, so its call does not run: {why}")]
    NotKept {
        /// The approval.
        id: ApprovalId,
        /// Why the write failed.
        why: String,
    },
}

/// The most approvals one session may have outstanding: a session whose calls are denied
/// or left unanswered again and again (the model retrying with other arguments) cannot take
/// every place under `[approvals] max_pending` from the other sessions.
pub const MAX_PENDING_PER_SESSION: usize = 16;

/// Why no approval could be minted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MintError {
    /// `[approvals] max_pending` approvals are outstanding.
    #[error(
        "{max_pending} approvals are already waiting for the owner (approvals.max_pending), \
         so brokerd asks about no more until some are used or expire"
    )]
    Full {
        /// The limit.
        max_pending: usize,
    },
    /// The session has [`MAX_PENDING_PER_SESSION`] approvals outstanding.
    #[error(
        "session {session:?} has {max} approvals waiting for the owner already, so brokerd \
         asks about no more of its calls until some are used or expire"
    )]
    SessionFull {
        /// The session.
        session: String,
        /// The limit.
        max: usize,
    },
    /// The system's random numbers failed, or no free id was drawn.
    #[error("brokerd cannot mint an approval id: {0}")]
    NoId(String),
    /// The approval could not be written to the state dir, so it is not asked about.
    #[error("brokerd cannot keep a new approval, so the owner is not asked: {0}")]
    NotKept(String),
}

/// The approvals one brokerd process minted and the turn allowances they left.
#[derive(Debug)]
pub struct ApprovalTable {
    expire: Duration,
    max_pending: usize,
    pending: HashMap<ApprovalId, Minted>,
    /// Used approvals and when they were minted (they are forgotten when they would have
    /// expired).
    used: HashMap<ApprovalId, Instant>,
    allowances: HashMap<TurnTool, Allowance>,
    /// Where the pending approvals are kept; `None`: in memory only.
    kept: Option<Kept>,
}

impl ApprovalTable {
    /// An empty table under `settings` (`expire_ms`, `max_pending`), kept in memory only.
    pub fn new(settings: &ApprovalSettings) -> ApprovalTable {
        ApprovalTable {
            expire: Duration::from_millis(settings.expire_ms),
            max_pending: settings.max_pending.max(1),
            pending: HashMap::new(),
            used: HashMap::new(),
            allowances: HashMap::new(),
            kept: None,
        }
    }

    /// The table under `settings` whose pending approvals are kept in `state_dir`
    /// ([`kept::APPROVALS_FILE`]): those written there before, still younger than `expire_ms`
    /// by the wall clock (the newest `max_pending`), are pending again. One minted "later" than
    /// now (the clock went back) is dropped: its age cannot be told.
    pub fn kept_in(settings: &ApprovalSettings, state_dir: &Path) -> ApprovalTable {
        let kept = Kept::in_dir(state_dir);
        let mut table = ApprovalTable::new(settings);
        let (now, now_ms) = (Instant::now(), unix_ms_now());
        let mut found = kept.load();
        found.sort_by_key(|a| std::cmp::Reverse(a.minted_unix_ms));
        for approval in found {
            let Some(age_ms) = now_ms.checked_sub(approval.minted_unix_ms) else {
                continue;
            };
            let age = Duration::from_millis(age_ms);
            let Some(minted) = now.checked_sub(age).filter(|_| age < table.expire) else {
                continue;
            };
            if table.pending.len() >= table.max_pending {
                break;
            }
            table.pending.insert(
                approval.id,
                Minted {
                    session: approval.session,
                    tool: approval.tool,
                    args_sha256: approval.args_sha256,
                    minted,
                    minted_unix_ms: approval.minted_unix_ms,
                },
            );
        }
        if !table.pending.is_empty() {
            tracing::info!(pending = table.pending.len(), path = %kept.path().display(), "approvals minted before this start are pending again");
        }
        table.kept = Some(kept);
        table
    }

    /// Writes the pending approvals where they are kept, if anywhere.
    fn save(&self) -> Result<(), kept::KeptError> {
        let Some(kept) = &self.kept else {
            return Ok(());
        };
        let approvals = self
            .pending
            .iter()
            .map(|(id, m)| KeptApproval {
                id: id.clone(),
                session: m.session.clone(),
                tool: m.tool.clone(),
                args_sha256: m.args_sha256.clone(),
                minted_unix_ms: m.minted_unix_ms,
            })
            .collect();
        kept.save(approvals)
    }

    /// How long an approval holds, in milliseconds (`ApprovalAsk::expires_in_ms`).
    pub fn expire_ms(&self) -> u64 {
        u64::try_from(self.expire.as_millis()).unwrap_or(u64::MAX)
    }

    /// Mints an approval for `request` (its session, tool and argument digest) at `now`.
    pub fn mint(&mut self, request: &ToolRequest, now: Instant) -> Result<ApprovalId, MintError> {
        self.prune(now);
        if self.pending.len() >= self.max_pending {
            return Err(MintError::Full {
                max_pending: self.max_pending,
            });
        }
        let of_session = self
            .pending
            .values()
            .filter(|m| m.session == request.session)
            .count();
        if of_session >= MAX_PENDING_PER_SESSION {
            return Err(MintError::SessionFull {
                session: request.session.to_string(),
                max: MAX_PENDING_PER_SESSION,
            });
        }
        let id = self.fresh_id()?;
        self.pending.insert(
            id.clone(),
            Minted {
                session: request.session.clone(),
                tool: request.tool.clone(),
                args_sha256: args_sha256(&request.arguments),
                minted: now,
                minted_unix_ms: unix_ms_now(),
            },
        );
        // On disk before anyone is asked: a restart while the owner decides keeps it.
        if let Err(e) = self.save() {
            self.pending.remove(&id);
            return Err(MintError::NotKept(e.to_string()));
        }
        Ok(id)
    }

    /// Uses approval `id` for `request` at `now`: it must be pending, not expired, and bound
    /// to the request's session, tool and argument digest. A good one is used up. One sent
    /// for another call stays pending for its own; an expired one is forgotten.
    pub fn consume(
        &mut self,
        id: &ApprovalId,
        request: &ToolRequest,
        now: Instant,
    ) -> Result<(), Refusal> {
        let Some(minted) = self.pending.get(id) else {
            self.prune(now);
            return Err(if self.used.contains_key(id) {
                Refusal::Used(id.clone())
            } else {
                Refusal::Unknown(id.clone())
            });
        };
        let refusal = if self.expired(minted.minted, now) {
            Some(Refusal::Expired {
                id: id.clone(),
                expire_ms: self.expire_ms(),
            })
        } else if minted.session != request.session {
            Some(Refusal::OtherSession {
                id: id.clone(),
                minted: minted.session.clone(),
                sent: request.session.clone(),
            })
        } else if minted.tool != request.tool {
            Some(Refusal::OtherTool {
                id: id.clone(),
                minted: minted.tool.clone(),
                sent: request.tool.clone(),
            })
        } else if minted.args_sha256 != args_sha256(&request.arguments) {
            Some(Refusal::OtherArguments(id.clone()))
        } else {
            None
        };
        if let Some(refusal) = refusal {
            self.prune(now);
            return Err(refusal);
        }
        if let Some(minted) = self.pending.remove(id) {
            // Off the disk before the call runs: a restart cannot make it usable again.
            if let Err(e) = self.save() {
                self.pending.insert(id.clone(), minted);
                return Err(Refusal::NotKept {
                    id: id.clone(),
                    why: e.to_string(),
                });
            }
            self.remember_used(id.clone(), minted.minted);
        }
        self.prune(now);
        Ok(())
    }

    /// Lets later calls of `tool` in `turn` of `session` run without asking, on the strength
    /// of `approval` (used with `for_turn`), until `expire_ms` after `now`.
    pub fn allow_turn(
        &mut self,
        session: &SessionId,
        turn: u64,
        tool: &str,
        approval: ApprovalId,
        now: Instant,
    ) {
        self.prune(now);
        let key = TurnTool {
            session: session.clone(),
            turn,
            tool: tool.to_string(),
        };
        if !self.allowances.contains_key(&key) && self.allowances.len() >= MAX_TURN_ALLOWANCES {
            let oldest = self
                .allowances
                .iter()
                .min_by_key(|(_, a)| a.granted)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                self.allowances.remove(&oldest);
            }
        }
        self.allowances.insert(
            key,
            Allowance {
                approval,
                granted: now,
            },
        );
    }

    /// The approval whose turn allowance lets `tool` run in `turn` of `session` now, if any.
    pub fn allowance(
        &mut self,
        session: &SessionId,
        turn: u64,
        tool: &str,
        now: Instant,
    ) -> Option<ApprovalId> {
        self.prune(now);
        let key = TurnTool {
            session: session.clone(),
            turn,
            tool: tool.to_string(),
        };
        self.allowances.get(&key).map(|a| a.approval.clone())
    }

    /// How many approvals are minted and neither used nor expired (as of the last use).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// How many turn allowances are kept (as of the last use).
    pub fn allowances(&self) -> usize {
        self.allowances.len()
    }

    fn expired(&self, since: Instant, now: Instant) -> bool {
        now.saturating_duration_since(since) >= self.expire
    }

    /// Forgets what expired by `now`.
    fn prune(&mut self, now: Instant) {
        let expire = self.expire;
        let live = |since: Instant| now.saturating_duration_since(since) < expire;
        self.pending.retain(|_, m| live(m.minted));
        self.used.retain(|_, minted| live(*minted));
        self.allowances.retain(|_, a| live(a.granted));
    }

    fn remember_used(&mut self, id: ApprovalId, minted: Instant) {
        if self.used.len() >= MAX_REMEMBERED_USED {
            let oldest = self
                .used
                .iter()
                .min_by_key(|(_, minted)| **minted)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                self.used.remove(&oldest);
            }
        }
        self.used.insert(id, minted);
    }

    /// An id in neither the pending nor the used table.
    fn fresh_id(&self) -> Result<ApprovalId, MintError> {
        for _ in 0..MINT_ATTEMPTS {
            let id = random_id()?;
            if !self.pending.contains_key(&id) && !self.used.contains_key(&id) {
                return Ok(id);
            }
        }
        Err(MintError::NoId(format!(
            "{MINT_ATTEMPTS} ids drawn were all taken"
        )))
    }
}

/// `ap-` and [`APPROVAL_ID_RANDOM_CHARS`] characters of `[a-z0-9]` from the system's random
/// numbers, each equally likely (bytes past the last whole multiple of 36 are drawn again).
fn random_id() -> Result<ApprovalId, MintError> {
    const FAIR_BELOW: u8 = (256 / ID_ALPHABET.len() * ID_ALPHABET.len()) as u8;
    let mut id = String::with_capacity(APPROVAL_ID_PREFIX.len() + APPROVAL_ID_RANDOM_CHARS);
    id.push_str(APPROVAL_ID_PREFIX);
    let mut left = APPROVAL_ID_RANDOM_CHARS;
    while left > 0 {
        let mut bytes = [0u8; 2 * APPROVAL_ID_RANDOM_CHARS];
        getrandom::fill(&mut bytes).map_err(|e| MintError::NoId(e.to_string()))?;
        for byte in bytes.into_iter().filter(|b| *b < FAIR_BELOW).take(left) {
            id.push(char::from(
                ID_ALPHABET[usize::from(byte) % ID_ALPHABET.len()],
            ));
            left -= 1;
        }
    }
    ApprovalId::new(&id).map_err(|e| MintError::NoId(e.to_string()))
}

#[cfg(test)]
mod tests;
