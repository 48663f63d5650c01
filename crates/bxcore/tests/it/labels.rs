#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `Labels::join` is a join: commutative, associative, idempotent, monotone.

use bxcore::{DataClass, Labels};
use proptest::prelude::*;

fn labels() -> impl Strategy<Value = Labels> {
    (0usize..4, any::<bool>()).prop_map(|(c, u)| Labels::new(DataClass::ALL[c], u))
}

#[test]
fn classes_are_ordered() {
    assert!(DataClass::Public < DataClass::Internal);
    assert!(DataClass::Internal < DataClass::Private);
    assert!(DataClass::Private < DataClass::Secret);
    assert_eq!(
        serde_json::to_string(&DataClass::Private).unwrap(),
        "\"private\""
    );
}

#[test]
fn join_takes_the_higher_class_and_any_untrusted() {
    let a = Labels::new(DataClass::Private, false);
    let b = Labels::new(DataClass::Public, true);
    assert_eq!(a.join(b), Labels::new(DataClass::Private, true));
    assert_eq!(Labels::PUBLIC.join(a), a);
}

proptest! {
    #[test]
    fn commutative(a in labels(), b in labels()) {
        prop_assert_eq!(a.join(b), b.join(a));
    }

    #[test]
    fn associative(a in labels(), b in labels(), c in labels()) {
        prop_assert_eq!(a.join(b).join(c), a.join(b.join(c)));
    }

    #[test]
    fn idempotent(a in labels()) {
        prop_assert_eq!(a.join(a), a);
    }

    #[test]
    fn monotone(a in labels(), b in labels(), c in labels()) {
        // Joining never lowers a label, and a lower input never gives a higher output.
        prop_assert!(a.flows_to(a.join(b)));
        if a.flows_to(b) {
            prop_assert!(a.join(c).flows_to(b.join(c)));
        }
    }

    #[test]
    fn a_derived_text_is_never_below_its_source_or_its_context(s in labels(), c in labels()) {
        let d = Labels::derived(s, c);
        prop_assert!(s.flows_to(d));
        prop_assert!(c.flows_to(d));
        // The least such label: nothing is added beyond what it came from.
        prop_assert_eq!(d, s.join(c));
        prop_assert_eq!(Labels::derived(s, Labels::PUBLIC), s);
    }

    #[test]
    fn deriving_is_monotone(s in labels(), t in labels(), c in labels()) {
        // More from the source or the context never gives a lower derived label.
        if s.flows_to(t) {
            prop_assert!(Labels::derived(s, c).flows_to(Labels::derived(t, c)));
            prop_assert!(Labels::derived(c, s).flows_to(Labels::derived(c, t)));
        }
    }
}
