//! `[slots]`: which llama-server slot serves which kind of work.

use bxconfig::Problems;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The most main slots `[slots] main` may list.
pub const MAX_MAIN_SLOTS: usize = 64;

/// `[slots] main`: one slot id, or several (`main = [0, 3]`). With several, a session goes
/// back to the slot that holds its cache when that slot is free, else to the free one used
/// least recently (its cache restored there from its KV file, `docs/kv.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MainSlots(pub Vec<u32>);

impl MainSlots {
    /// The first (the one `boxctl status` names).
    pub fn first(&self) -> u32 {
        self.0.first().copied().unwrap_or(0)
    }
}

impl Serialize for MainSlots {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0.as_slice() {
            [one] => s.serialize_u32(*one),
            many => many.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for MainSlots {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MainSlots, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(u32),
            Many(Vec<u32>),
        }
        match OneOrMany::deserialize(d) {
            Ok(OneOrMany::One(one)) => Ok(MainSlots(vec![one])),
            Ok(OneOrMany::Many(many)) => Ok(MainSlots(many)),
            Err(_) => Err(serde::de::Error::custom(
                "slots.main must be a slot id or a list of slot ids",
            )),
        }
    }
}

/// `[slots]`: slot numbers (`id_slot`) by role, so background work never evicts the cached
/// prompt of a main slot. No slot serves two roles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Slots {
    /// The slot (or slots) for turns.
    pub main: MainSlots,
    /// The slot for summaries and compaction.
    pub background: u32,
    /// The slot for subagents.
    pub subagent: u32,
}

impl Default for Slots {
    fn default() -> Slots {
        Slots {
            main: MainSlots(vec![0]),
            background: 1,
            subagent: 2,
        }
    }
}

impl Slots {
    /// One slot, `main`, for turns, and `background` and `subagent`.
    pub fn one_main(main: u32, background: u32, subagent: u32) -> Slots {
        Slots {
            main: MainSlots(vec![main]),
            background,
            subagent,
        }
    }

    /// Every slot with its role's name, main slots first.
    pub fn by_role(&self) -> Vec<(&'static str, u32)> {
        self.main
            .0
            .iter()
            .map(|slot| ("main", *slot))
            .chain([("background", self.background), ("subagent", self.subagent)])
            .collect()
    }

    pub(super) fn check(&self, expected_slots: Option<u32>, p: &mut Problems) {
        p.check(
            !self.main.0.is_empty(),
            "slots.main",
            "lists no slot: name at least one",
        );
        p.check(
            self.main.0.len() <= MAX_MAIN_SLOTS,
            "slots.main",
            format!("lists more than {MAX_MAIN_SLOTS} slots"),
        );
        let roles = self.by_role();
        for (i, (role, slot)) in roles.iter().enumerate() {
            if let Some((other, _)) = roles[..i].iter().find(|(_, s)| s == slot) {
                let why = if role == other {
                    format!("slot {slot} is listed twice")
                } else {
                    format!("slot {slot} is already slots.{other}: each role needs its own slot")
                };
                p.push(format!("slots.{role}"), why);
            }
            if let Some(n) = expected_slots {
                p.check(
                    *slot < n,
                    format!("slots.{role}"),
                    format!(
                        "slot {slot} does not exist: expect.slots is {n} (slots 0 to {})",
                        n.saturating_sub(1)
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Slots, String> {
        let table: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        serde_json::from_value(table).map_err(|e| e.to_string())
    }

    #[test]
    fn main_is_one_slot_or_several() {
        assert_eq!(parse(r#"{"main": 3}"#).unwrap().main, MainSlots(vec![3]));
        assert_eq!(
            parse(r#"{"main": [0, 3]}"#).unwrap().main,
            MainSlots(vec![0, 3])
        );
        let bad = parse(r#"{"main": "zero"}"#).unwrap_err();
        assert!(bad.contains("a slot id or a list"), "{bad}");
        let one = serde_json::to_string(&Slots::default()).unwrap();
        assert!(one.contains(r#""main":0"#), "{one}");
    }

    #[test]
    fn a_slot_listed_twice_or_in_two_roles_or_none_is_named() {
        let found = |slots: Slots| {
            let mut p = Problems::new();
            slots.check(Some(5), &mut p);
            p.finish()
                .err()
                .unwrap_or_default()
                .into_iter()
                .map(|p| format!("{}: {}", p.key, p.message))
                .collect::<Vec<_>>()
        };
        let twice = found(Slots {
            main: MainSlots(vec![0, 0]),
            ..Slots::default()
        });
        assert!(twice[0].contains("listed twice"), "{twice:?}");
        let shared = found(Slots {
            main: MainSlots(vec![0, 1]),
            ..Slots::default()
        });
        assert!(shared[0].contains("already slots.main"), "{shared:?}");
        let none = found(Slots {
            main: MainSlots(Vec::new()),
            ..Slots::default()
        });
        assert!(none[0].contains("lists no slot"), "{none:?}");
        assert!(
            found(Slots {
                main: MainSlots(vec![0, 3]),
                ..Slots::default()
            })
            .is_empty()
        );
    }
}
