//! Information-flow labels: how secret a piece of context is, and whether it came from outside.

use serde::{Deserialize, Serialize};

/// How far data may travel. Ordered `Public < Internal < Private < Secret`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum DataClass {
    /// May leave the box.
    #[default]
    Public,
    /// Stays on the box; fine for any local session.
    Internal,
    /// The owner's data.
    Private,
    /// Credentials and the like.
    Secret,
}

impl DataClass {
    /// Every class, lowest first.
    pub const ALL: [DataClass; 4] = [
        DataClass::Public,
        DataClass::Internal,
        DataClass::Private,
        DataClass::Secret,
    ];
}

/// The label of a result or of a whole context: its class and whether any of it is untrusted
/// (came from outside and may carry instructions nobody gave).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    /// The highest class of anything it was made from.
    pub class: DataClass,
    /// True when anything it was made from is untrusted.
    pub untrusted: bool,
}

impl Labels {
    /// The label of nothing: public and trusted. The identity of [`Labels::join`].
    pub const PUBLIC: Labels = Labels {
        class: DataClass::Public,
        untrusted: false,
    };

    /// A label of `class`, untrusted or not.
    pub fn new(class: DataClass, untrusted: bool) -> Labels {
        Labels { class, untrusted }
    }

    /// The least label above both: the higher class, untrusted if either is.
    #[must_use]
    pub fn join(self, other: Labels) -> Labels {
        Labels {
            class: self.class.max(other.class),
            untrusted: self.untrusted || other.untrusted,
        }
    }

    /// The label of a text derived from a source labelled `source` by a model call (or any
    /// process) whose context was labelled `context`: a summary, a carry, a memory note, a
    /// subagent's task or answer, a notification. It is their join, because the text can
    /// repeat anything either held; nothing derived is ever labelled below what it came from
    /// or the context it was made in. Every derived text in boxmaker is labelled through this
    /// one function.
    #[must_use]
    pub fn derived(source: Labels, context: Labels) -> Labels {
        source.join(context)
    }

    /// True when `self` is at or below `other` in both parts.
    pub fn flows_to(self, other: Labels) -> bool {
        self.class <= other.class && (!self.untrusted || other.untrusted)
    }
}
