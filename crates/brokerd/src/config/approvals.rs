//! Approvals in brokerd's config: a grant's `approve` key (with `when_untrusted = "ask"`, the
//! calls that ask the owner first) and the `[approvals]` section (how long an approval holds,
//! how many may be outstanding). `docs/approvals.md` is the design.

use super::grant::WhenUntrusted;
use bxconfig::Problems;
use serde::{Deserialize, Serialize};

/// When a grant's calls ask the owner first (the grant key `approve`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Approve {
    /// Never: the grant's other keys decide alone.
    #[default]
    Never,
    /// Every call of the tool asks the owner first.
    Always,
    /// A call asks once untrusted text is in the session's context: the same as
    /// `when_untrusted = "ask"`, which it sets.
    WhenUntrusted,
}

impl Approve {
    /// The value as the config writes it (`never`, `always`, `when_untrusted`).
    pub fn as_str(self) -> &'static str {
        match self {
            Approve::Never => "never",
            Approve::Always => "always",
            Approve::WhenUntrusted => "when_untrusted",
        }
    }
}

/// A grant's `when_untrusted` once `approve` is taken into account: `approve =
/// "when_untrusted"` without an explicit `when_untrusted` means `ask`, so the tool's default
/// (`deny` for `write_file`) does not shadow it. An explicit value is kept as written; a
/// contradiction is left for [`check_grant`] to name.
pub(super) fn resolve_when_untrusted(
    approve: Approve,
    written: Option<WhenUntrusted>,
    default: WhenUntrusted,
) -> WhenUntrusted {
    match (approve, written) {
        (_, Some(written)) => written,
        (Approve::WhenUntrusted, None) => WhenUntrusted::Ask,
        (_, None) => default,
    }
}

/// Checks the approval keys of the `i`th grant: `approve = "when_untrusted"` asks in an
/// untrusted context, so a `when_untrusted` of `allow` or `deny` beside it contradicts it.
pub(super) fn check_grant(
    i: usize,
    approve: Approve,
    when_untrusted: WhenUntrusted,
    p: &mut Problems,
) {
    if approve == Approve::WhenUntrusted && when_untrusted != WhenUntrusted::Ask {
        p.push(
            format!("grants[{i}].when_untrusted"),
            format!(
                "is \"{}\", but approve = \"when_untrusted\" means \"ask\" in an untrusted \
                 context: the two contradict each other; leave when_untrusted out (or set it \
                 to \"ask\")",
                when_untrusted.as_str()
            ),
        );
    }
}

/// `[approvals]`: how brokerd keeps the approvals it mints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApprovalSettings {
    /// How long brokerd accepts an approval it minted, in milliseconds; an older one is
    /// refused. A turn allowance (`for_turn`) lasts as long.
    pub expire_ms: u64,
    /// The most approvals minted and not yet used or expired; past it a call that needs one
    /// is denied (`not_approved`).
    pub max_pending: usize,
}

impl Default for ApprovalSettings {
    fn default() -> ApprovalSettings {
        ApprovalSettings {
            expire_ms: 900_000,
            max_pending: 64,
        }
    }
}

impl ApprovalSettings {
    /// Checks the section.
    pub(super) fn check(&self, p: &mut Problems) {
        p.at_least("approvals.expire_ms", self.expire_ms, 1);
        p.at_least("approvals.max_pending", self.max_pending, 1);
    }
}
