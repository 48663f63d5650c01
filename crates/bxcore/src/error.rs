//! The one error type for values that do not fit their rules.

/// A value that does not fit its type's rules: says which value and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what}: {why}")]
pub struct ValueError {
    /// What kind of value was refused, e.g. `session id`.
    pub what: &'static str,
    /// Why it was refused, in words a person can act on.
    pub why: String,
}

impl ValueError {
    /// A refusal of a `what` value for the reason `why`.
    pub fn new(what: &'static str, why: impl Into<String>) -> ValueError {
        ValueError {
            what,
            why: why.into(),
        }
    }
}
